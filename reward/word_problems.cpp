#include "reward/word_problems.h"

#include <algorithm>

#include "core/error.h"
#include "reward/split_hash.h"

namespace rlcpp {
namespace {

struct Person {
  const char* name;
  const char* she;  // subject pronoun, lower case
  const char* She;
};

const std::vector<Person> kPeople = {
    {"Ava", "she", "She"},    {"Ben", "he", "He"},      {"Chloe", "she", "She"}, {"Daniel", "he", "He"},
    {"Emma", "she", "She"},   {"Farid", "he", "He"},    {"Grace", "she", "She"}, {"Hiro", "he", "He"},
    {"Isla", "she", "She"},   {"Jamal", "he", "He"},    {"Keiko", "she", "She"}, {"Liam", "he", "He"},
    {"Maya", "she", "She"},   {"Noah", "he", "He"},     {"Olivia", "she", "She"}, {"Pedro", "he", "He"},
    {"Quinn", "she", "She"},  {"Ravi", "he", "He"},     {"Sofia", "she", "She"}, {"Tom", "he", "He"},
    {"Uma", "she", "She"},    {"Victor", "he", "He"},   {"Wen", "she", "She"},   {"Yusuf", "he", "He"},
};

const std::vector<std::string> kTemplates = {"shopping", "sharing", "rate",  "ages",
                                             "remaining", "savings", "boxes", "reading"};

const std::vector<std::string> kShopItems = {"pens",     "notebooks", "apples",    "candles",      "stickers",
                                             "mugs",     "batteries", "postcards", "tennis balls", "cookies"};
const std::vector<std::string> kShareObjects = {"marbles", "stickers", "cards",   "beads",
                                                "stamps",  "shells",   "crayons", "buttons"};
struct Machine {
  const char* name;
  const char* verbs;  // third person: "prints"
  const char* verb;   // base form: "print"
  const char* things;
};
const std::vector<Machine> kMachines = {
    {"printer", "prints", "print", "pages"},        {"machine", "makes", "make", "toys"},
    {"bakery oven", "bakes", "bake", "loaves"},     {"factory line", "fills", "fill", "bottles"},
    {"robot", "packs", "pack", "boxes"},            {"juicer", "squeezes", "squeeze", "oranges"},
};
const std::vector<std::string> kDays = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
struct Fraction {
  int64_t denominator;
  const char* lower;  // "a third"
  const char* upper;  // "A third"
};
const std::vector<Fraction> kFractions = {{2, "half", "Half"}, {3, "a third", "A third"},
                                          {4, "a quarter", "A quarter"}, {5, "a fifth", "A fifth"}};
const std::vector<std::string> kBigBuys = {"a jacket", "books", "groceries", "a concert ticket", "shoes", "a gift"};
const std::vector<std::string> kSmallBuys = {"lunch", "a taxi", "snacks", "a movie", "a magazine", "bus fare"};
const std::vector<std::string> kSavingsItems = {"bike", "guitar", "video game", "skateboard", "telescope", "backpack"};
const std::vector<std::string> kBakedGoods = {"cookies", "muffins", "cupcakes", "bagels", "rolls", "brownies"};
const std::vector<int64_t> kBills = {20, 50, 100, 200, 500};

std::string str(int64_t x) { return std::to_string(x); }

// Uniform in [lo, hi].
int64_t uniform(PhiloxStream& rng, int64_t lo, int64_t hi) {
  RLCPP_CHECK(lo <= hi, "word problem: empty range [" << lo << ", " << hi << "]");
  return lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo + 1)));
}

template <class T> const T& pick(PhiloxStream& rng, const std::vector<T>& items) { return items[rng.below(items.size())]; }

// `count` distinct indices into a list of `size`, each drawn from the ones still left.
std::vector<size_t> pick_distinct(PhiloxStream& rng, size_t size, size_t count) {
  std::vector<size_t> left(size), out;
  for (size_t i = 0; i < size; ++i) left[i] = i;
  for (size_t k = 0; k < count; ++k) {
    size_t at = rng.below(left.size());
    out.push_back(left[at]);
    left.erase(left.begin() + static_cast<std::ptrdiff_t>(at));
  }
  return out;
}

WordProblem make(const std::string& name, std::vector<int64_t> numbers, std::string question,
                 const std::string& steps_text, int64_t answer, int64_t steps) {
  WordProblem p;
  p.template_name = name;
  p.numbers = std::move(numbers);
  p.question = std::move(question);
  p.solution = steps_text + "\n#### " + str(answer);
  p.answer = answer;
  p.steps = steps;
  return p;
}

WordProblem shopping(PhiloxStream& rng) {
  const Person& who = pick(rng, kPeople);
  std::vector<size_t> items = pick_distinct(rng, kShopItems.size(), 2);
  const std::string& first = kShopItems[items[0]];
  const std::string& second = kShopItems[items[1]];
  int64_t a = uniform(rng, 2, 9);
  int64_t p = uniform(rng, 2, 15);
  int64_t b = uniform(rng, 2, 9);
  int64_t q = uniform(rng, 2, 15);
  int64_t ap = a * p, bq = b * q, total = ap + bq;
  int64_t bill = *std::find_if(kBills.begin(), kBills.end(), [&](int64_t x) { return x > total; });
  int64_t change = bill - total;
  std::string question = std::string(who.name) + " buys " + str(a) + " " + first + " for $" + str(p) + " each and " +
                         str(b) + " " + second + " for $" + str(q) + " each. " + who.She + " pays with a $" +
                         str(bill) + " bill. How much change does " + who.she + " get, in dollars?";
  std::string steps = "The " + first + " cost " + str(a) + " * " + str(p) + " = " + str(ap) + " dollars. The " + second +
                      " cost " + str(b) + " * " + str(q) + " = " + str(bq) + " dollars. Together they cost " + str(ap) +
                      " + " + str(bq) + " = " + str(total) + " dollars. The change is " + str(bill) + " - " +
                      str(total) + " = " + str(change) + " dollars.";
  return make("shopping", {a, p, b, q}, question, steps, change, 4);
}

WordProblem sharing(PhiloxStream& rng) {
  const Person& who = pick(rng, kPeople);
  const std::string& objects = pick(rng, kShareObjects);
  int64_t k = uniform(rng, 2, 8);
  int64_t b = uniform(rng, 2, 9);
  int64_t c = uniform(rng, 2, 12);
  int64_t a0 = uniform(rng, 1, 30);
  int64_t a = a0 + (k - (a0 + b * c) % k) % k;  // so that everything shares out evenly
  int64_t bc = b * c, sum = a + bc, each = sum / k;
  std::string question = std::string(who.name) + " has " + str(a) + " " + objects + ". " + who.She + " buys " + str(b) +
                         " packs with " + str(c) + " " + objects + " in each. Then " + who.she + " shares all of the " +
                         objects + " equally among " + str(k) + " friends. How many " + objects +
                         " does each friend get?";
  std::string steps = "The packs hold " + str(b) + " * " + str(c) + " = " + str(bc) + " " + objects + ". Then " +
                      who.name + " has " + str(a) + " + " + str(bc) + " = " + str(sum) + " " + objects +
                      ". Each friend gets " + str(sum) + " / " + str(k) + " = " + str(each) + " " + objects + ".";
  return make("sharing", {a, b, c, k}, question, steps, each, 3);
}

WordProblem rate(PhiloxStream& rng) {
  const Machine& m = pick(rng, kMachines);
  int64_t day = uniform(rng, 0, 5);
  int64_t r = uniform(rng, 5, 60);
  int64_t h1 = uniform(rng, 2, 10);
  int64_t h2 = uniform(rng, 2, 10);
  const std::string& d1 = kDays[day];
  const std::string& d2 = kDays[day + 1];
  int64_t x = r * h1, y = r * h2, z = x + y;
  std::string question = std::string("A ") + m.name + " " + m.verbs + " " + str(r) + " " + m.things +
                         " per hour. It runs for " + str(h1) + " hours on " + d1 + " and " + str(h2) + " hours on " +
                         d2 + ". How many " + m.things + " does it " + m.verb + " on the two days together?";
  std::string steps = "On " + d1 + " it " + m.verbs + " " + str(r) + " * " + str(h1) + " = " + str(x) + " " + m.things +
                      ". On " + d2 + " it " + m.verbs + " " + str(r) + " * " + str(h2) + " = " + str(y) + " " +
                      m.things + ". Together that is " + str(x) + " + " + str(y) + " = " + str(z) + " " + m.things +
                      ".";
  return make("rate", {r, h1, h2}, question, steps, z, 3);
}

WordProblem ages(PhiloxStream& rng) {
  std::vector<size_t> who = pick_distinct(rng, kPeople.size(), 3);
  const std::string A = kPeople[who[0]].name, B = kPeople[who[1]].name, C = kPeople[who[2]].name;
  int64_t a = uniform(rng, 3, 15);
  int64_t m = uniform(rng, 2, 4);
  int64_t d = uniform(rng, 1, std::min<int64_t>(20, a * m - 1));
  int64_t y = uniform(rng, 2, 15);
  int64_t b = a * m, c = b - d, r = c + y;
  std::string question = A + " is " + str(a) + " years old. " + B + " is " + str(m) + " times as old as " + A + ". " +
                         C + " is " + str(d) + " years younger than " + B + ". How old will " + C + " be in " +
                         str(y) + " years?";
  std::string steps = B + " is " + str(a) + " * " + str(m) + " = " + str(b) + " years old. " + C + " is " + str(b) +
                      " - " + str(d) + " = " + str(c) + " years old. In " + str(y) + " years " + C + " will be " +
                      str(c) + " + " + str(y) + " = " + str(r) + " years old.";
  return make("ages", {a, m, d, y}, question, steps, r, 3);
}

WordProblem remaining(PhiloxStream& rng) {
  const Person& who = pick(rng, kPeople);
  const Fraction& part = pick(rng, kFractions);
  const std::string& big = pick(rng, kBigBuys);
  const std::string& small = pick(rng, kSmallBuys);
  int64_t f = uniform(rng, 4, 40);
  int64_t m = part.denominator * f;
  int64_t r1 = m - f;
  int64_t s = uniform(rng, 1, std::min<int64_t>(60, r1 - 1));
  int64_t r2 = r1 - s;
  std::string question = std::string(who.name) + " has $" + str(m) + ". " + who.She + " spends " + part.lower +
                         " of it on " + big + " and then $" + str(s) + " on " + small + ". How many dollars does " +
                         who.she + " have left?";
  std::string steps = std::string(part.upper) + " of " + str(m) + " dollars is " + str(m) + " / " +
                      str(part.denominator) + " = " + str(f) + " dollars, so " + who.she + " has " + str(m) + " - " +
                      str(f) + " = " + str(r1) + " dollars left. After spending " + str(s) + " dollars more, " +
                      who.she + " has " + str(r1) + " - " + str(s) + " = " + str(r2) + " dollars.";
  return make("remaining", {part.denominator, m, s}, question, steps, r2, 3);
}

WordProblem savings(PhiloxStream& rng) {
  const Person& who = pick(rng, kPeople);
  const std::string& item = pick(rng, kSavingsItems);
  int64_t a = uniform(rng, 3, 25);
  int64_t w = uniform(rng, 3, 20);
  int64_t c = uniform(rng, 5, a * w - 1);
  int64_t t = a * w, r = t - c;
  std::string question = std::string(who.name) + " saves $" + str(a) + " every week. After " + str(w) + " weeks, " +
                         who.she + " buys a " + item + " that costs $" + str(c) + ". How many dollars does " + who.she +
                         " have left?";
  std::string steps = "In " + str(w) + " weeks " + who.she + " saves " + str(a) + " * " + str(w) + " = " + str(t) +
                      " dollars. After buying the " + item + ", " + who.she + " has " + str(t) + " - " + str(c) +
                      " = " + str(r) + " dollars left.";
  return make("savings", {a, w, c}, question, steps, r, 2);
}

WordProblem boxes(PhiloxStream& rng) {
  const std::string& goods = pick(rng, kBakedGoods);
  int64_t t = uniform(rng, 2, 9);
  int64_t n = uniform(rng, 6, 24);
  int64_t b = uniform(rng, 2, 10);
  int64_t total = t * n;
  int64_t s0 = uniform(rng, 1, total - b);
  int64_t s = s0 + (total - s0) % b;  // the rest fills whole boxes, at least one
  int64_t rest = total - s, filled = rest / b;
  std::string question = "A bakery bakes " + str(t) + " trays of " + goods + " with " + str(n) + " " + goods +
                         " on each tray. It sells " + str(s) + " " + goods + " and packs the rest into boxes of " +
                         str(b) + ". How many boxes does it fill?";
  std::string steps = "The bakery bakes " + str(t) + " * " + str(n) + " = " + str(total) + " " + goods +
                      ". After selling " + str(s) + ", " + str(total) + " - " + str(s) + " = " + str(rest) + " " +
                      goods + " are left. They fill " + str(rest) + " / " + str(b) + " = " + str(filled) + " boxes.";
  return make("boxes", {t, n, s, b}, question, steps, filled, 3);
}

WordProblem reading(PhiloxStream& rng) {
  const Person& who = pick(rng, kPeople);
  int64_t p1 = uniform(rng, 5, 30);
  int64_t d1 = uniform(rng, 2, 7);
  int64_t p2 = uniform(rng, 5, 30);
  int64_t d2 = uniform(rng, 2, 7);
  int64_t extra = uniform(rng, 10, 200);
  int64_t x = p1 * d1, y = p2 * d2, z = x + y, pages = z + extra;
  std::string question = std::string(who.name) + "'s book has " + str(pages) + " pages. " + who.She + " reads " +
                         str(p1) + " pages a day for " + str(d1) + " days, then " + str(p2) + " pages a day for " +
                         str(d2) + " days. How many pages are left to read?";
  std::string steps = std::string("First ") + who.she + " reads " + str(p1) + " * " + str(d1) + " = " + str(x) +
                      " pages. Then " + who.she + " reads " + str(p2) + " * " + str(d2) + " = " + str(y) +
                      " pages. That is " + str(x) + " + " + str(y) + " = " + str(z) + " pages in all, so " +
                      str(pages) + " - " + str(z) + " = " + str(extra) + " pages are left.";
  return make("reading", {p1, d1, p2, d2, pages}, question, steps, extra, 4);
}

}  // namespace

const std::vector<std::string>& word_problem_templates() { return kTemplates; }

WordProblem draw_word_problem(PhiloxStream& rng) {
  switch (rng.below(kTemplates.size())) {
    case 0: return shopping(rng);
    case 1: return sharing(rng);
    case 2: return rate(rng);
    case 3: return ages(rng);
    case 4: return remaining(rng);
    case 5: return savings(rng);
    case 6: return boxes(rng);
    default: return reading(rng);
  }
}

uint64_t word_problem_key(const std::string& template_name, const std::vector<int64_t>& numbers) {
  std::string key = template_name + ":";
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (i > 0) key += ',';
    key += std::to_string(numbers[i]);
  }
  return fnv1a64(key);
}

}  // namespace rlcpp
