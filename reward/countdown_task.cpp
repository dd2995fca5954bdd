#include "reward/countdown_task.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "core/error.h"
#include "reward/expression_parser.h"
#include "reward/math_answer.h"
#include "reward/split_hash.h"

namespace rlcpp {
namespace {

constexpr uint64_t kEvalStream = 0x6576616c;  // "eval"
constexpr int64_t kMaxEvalSize = 100'000;  // far below the number of distinct test puzzles
// A random tree lands in [1, kMaxTarget] in roughly one draw in three (3 numbers) to six (4 numbers); this
// many failures in a row never happens unless the generator is broken.
constexpr int kMaxDrawAttempts = 100000;

// A partial expression while building a puzzle: its integer value, its text with minimal parentheses, and
// the precedence of its top operator (1: + -, 2: * /, 3: a number).
struct Node {
  int64_t value;
  std::string text;
  int precedence;
};

Node combine(const Node& left, char op, const Node& right) {
  int prec = (op == '+' || op == '-') ? 1 : 2;
  // a-(b+c) and a/(b*c) need their parentheses; a+(b-c) and a*(b/c) do not under exact arithmetic.
  bool paren_left = left.precedence < prec;
  bool paren_right = right.precedence < prec || (right.precedence == prec && (op == '-' || op == '/'));
  std::string text = (paren_left ? "(" + left.text + ")" : left.text) + op +
                     (paren_right ? "(" + right.text + ")" : right.text);
  int64_t value = 0;
  switch (op) {
    case '+': value = left.value + right.value; break;
    case '-': value = left.value - right.value; break;
    case '*': value = left.value * right.value; break;
    default: value = left.value / right.value; break;
  }
  return Node{value, std::move(text), prec};
}

std::vector<int64_t> read_numbers(const Problem& problem) {
  const Json& m = problem.meta;
  RLCPP_CHECK(m.is_object() && m.contains("numbers") && m["numbers"].is_array() && m.contains("target") &&
                  m["target"].is_number_integer(),
              "countdown problem '" << problem.prompt << "' lacks numbers/target in its meta " << m.dump());
  std::vector<int64_t> numbers;
  for (const Json& x : m["numbers"]) {
    RLCPP_CHECK(x.is_number_integer(), "countdown problem '" << problem.prompt << "': number " << x.dump()
                                                             << " is not an integer");
    numbers.push_back(x.get<int64_t>());
  }
  return numbers;
}

}  // namespace

CountdownTask::CountdownTask(uint64_t eval_seed, ScorerSpec scorer, CountdownStyle style)
    : eval_seed_(eval_seed), scorer_(scorer), style_(style) {
  RLCPP_CHECK(scorer.kind == ScorerKind::kFormat || scorer.kind == ScorerKind::kExact,
              "config key 'task.scorer': " << name() << " takes \"format\" or \"exact\", got \""
                                           << scorer_kind_name(scorer.kind) << "\"");
  if (scorer_.kind == ScorerKind::kExact) scorer_.format_score = 0.0;
}

uint64_t CountdownTask::split_key(std::vector<int64_t> numbers, int64_t target) {
  RLCPP_CHECK(target >= 0 && target < 1000, "countdown target " << target << " is not in [0, 999]");
  std::sort(numbers.begin(), numbers.end());
  uint64_t key = 0;
  for (int64_t x : numbers) {
    RLCPP_CHECK(x >= 1 && x <= kMaxOperand, "countdown number " << x << " is not in [1, " << kMaxOperand << "]");
    key = key * 100 + static_cast<uint64_t>(x);
  }
  // Numbers are >= 1, so 3 and 4 numbers never share a key.
  return key * 1000 + static_cast<uint64_t>(target);
}

Problem CountdownTask::make_problem(const std::vector<int64_t>& numbers, int64_t target,
                                    const std::string& solution) const {
  std::ostringstream prompt;
  if (style_ == CountdownStyle::kWords) {
    prompt << "Using the numbers ";
    for (size_t i = 0; i < numbers.size(); ++i)
      prompt << (i == 0 ? "" : i + 1 == numbers.size() ? " and " : ", ") << numbers[i];
    prompt << ", each exactly once, with + - * / and parentheses, make " << target
           << ". Put the final expression after ####.\n";
  } else {
    prompt << '(';
    for (size_t i = 0; i < numbers.size(); ++i) prompt << (i ? " " : "") << numbers[i];
    prompt << ')' << target << '=';
  }
  Problem p;
  p.prompt = prompt.str();
  p.answer = style_ == CountdownStyle::kWords ? "#### " + solution : solution;
  p.meta = Json{{"numbers", numbers}, {"target", target}};
  // The key of the numbers in shown order: unique per prompt (split_key sorts them; this does not).
  uint64_t id = 0;
  for (int64_t x : numbers) id = id * 100 + static_cast<uint64_t>(x);
  p.id = id * 1000 + static_cast<uint64_t>(target);
  return p;
}

Problem CountdownTask::draw(PhiloxStream& rng) const {
  // The count is drawn once, outside the retries: 4 numbers miss the target range more often than 3, and
  // redrawing it would skew puzzles towards 3 numbers.
  int64_t count = kMinNumbers + static_cast<int64_t>(rng.below(kMaxNumbers - kMinNumbers + 1));
  for (int attempt = 0; attempt < kMaxDrawAttempts; ++attempt) {
    std::vector<int64_t> numbers(count);
    for (int64_t& x : numbers) x = 1 + static_cast<int64_t>(rng.below(kMaxOperand));
    std::vector<Node> nodes;
    for (int64_t x : numbers) nodes.push_back(Node{x, std::to_string(x), 3});
    // Combine two random nodes with a random operator until one is left: a random tree shape and leaf order.
    // Subtraction is offered only when it stays non-negative and division only when it is exact, so every
    // intermediate result is a natural number, as in the game (the scorer itself accepts any rational).
    while (nodes.size() > 1) {
      size_t i = rng.below(nodes.size());
      size_t j = rng.below(nodes.size() - 1);
      if (j >= i) ++j;
      const Node& left = nodes[i];
      const Node& right = nodes[j];
      std::string ops = "+*";
      if (left.value >= right.value) ops += '-';
      if (right.value != 0 && left.value % right.value == 0) ops += '/';
      char op = ops[rng.below(ops.size())];
      Node joined = combine(left, op, right);
      nodes.erase(nodes.begin() + std::max(i, j));
      nodes.erase(nodes.begin() + std::min(i, j));
      nodes.push_back(std::move(joined));
    }
    int64_t target = nodes[0].value;
    if (target >= 1 && target <= kMaxTarget) return make_problem(numbers, target, nodes[0].text);
  }
  RLCPP_FAIL("countdown: no puzzle with a target in [1, " << kMaxTarget << "] after " << kMaxDrawAttempts
                                                          << " draws");
}

Problem CountdownTask::sample_train(PhiloxStream& rng) const {
  while (true) {
    Problem p = draw(rng);
    if (!is_test(p)) return p;
  }
}

std::vector<Problem> CountdownTask::eval_set(int64_t n) const {
  RLCPP_CHECK(n >= 0 && n <= kMaxEvalSize, "eval set size " << n << " is not in [0, " << kMaxEvalSize << "]");
  PhiloxStream rng(eval_seed_, kEvalStream);
  std::unordered_set<uint64_t> seen;
  std::vector<Problem> out;
  while (static_cast<int64_t>(out.size()) < n) {
    Problem p = draw(rng);
    uint64_t key = split_key(read_numbers(p), p.meta["target"].get<int64_t>());
    if (is_test_key(key) && seen.insert(key).second) out.push_back(std::move(p));
  }
  return out;
}

bool CountdownTask::is_test(const Problem& problem) const {
  return is_test_key(split_key(read_numbers(problem), problem.meta["target"].get<int64_t>()));
}

RewardResult CountdownTask::score(const Problem& problem, const std::string& response, bool terminated) const {
  if (style_ == CountdownStyle::kCompact) return score_expression(problem, response, terminated);
  std::optional<std::string_view> line = text_after_last_hashes(response);
  if (!line) return score_expression(problem, std::nullopt, terminated);
  std::string_view expression = *line;
  // "#### 63-(70-20) = 13." states the expression and its value; the expression is what is checked.
  if (size_t eq = expression.find('='); eq != expression.npos) expression = expression.substr(0, eq);
  while (!expression.empty() && (expression.back() == ' ' || expression.back() == '.')) expression.remove_suffix(1);
  return score_expression(problem, std::string(expression), terminated);
}

RewardResult CountdownTask::score_expression(const Problem& problem, const std::optional<std::string>& expression,
                                             bool terminated) const {
  std::vector<int64_t> numbers = read_numbers(problem);
  int64_t target = problem.meta["target"].get<int64_t>();
  ExpressionResult expr = expression ? evaluate_expression(*expression) : ExpressionResult{};
  bool well_formed = expression.has_value() && expr.well_formed();
  bool uses_numbers = false;
  if (well_formed) {
    // Compared as written, so a literal too large for 64 bits is simply not one of the numbers.
    std::vector<std::string> given;
    for (int64_t x : numbers) given.push_back(std::to_string(x));
    std::vector<std::string> used = expr.literals;
    std::sort(given.begin(), given.end());
    std::sort(used.begin(), used.end());
    uses_numbers = given == used;
  }
  bool correct = terminated && uses_numbers && expr.status == ExpressionStatus::kOk &&
                 expr.value == Rational{target, 1};
  RewardResult r;
  r.correct = correct;
  r.total = correct ? 1.0 : (terminated && well_formed ? scorer_.format_score : 0.0);
  r.components = {{"correct", correct ? 1.0 : 0.0},
                  {"well_formed", well_formed ? 1.0 : 0.0},
                  {"terminated", terminated ? 1.0 : 0.0},
                  {"uses_numbers", uses_numbers ? 1.0 : 0.0}};
  return r;
}

}  // namespace rlcpp
