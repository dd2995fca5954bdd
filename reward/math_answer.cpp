#include "reward/math_answer.h"

#include <cctype>

#include "core/error.h"

namespace rlcpp {
namespace {

constexpr std::string_view kUnicodeMinus = "\xE2\x88\x92";  // U+2212
constexpr std::string_view kDegree = "\xC2\xB0";            // U+00B0
constexpr size_t kMaxExactDigits = 18;  // numerators and denominators up to this many digits are reduced exactly

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// "-12.5" style canonical decimal from its parts: no leading zeros in `integer`, no trailing zeros in
// `fraction`, and zero is never negative.
std::string canonical_decimal(bool negative, std::string_view integer, std::string_view fraction) {
  while (!integer.empty() && integer.front() == '0') integer.remove_prefix(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (integer.empty() && fraction.empty()) return "0";
  std::string out = negative ? "-" : "";
  if (integer.empty()) out += '0';
  out += integer;
  if (!fraction.empty()) {
    out += '.';
    out += fraction;
  }
  return out;
}

std::string u128_to_string(unsigned __int128 x) {
  if (x == 0) return "0";
  std::string s;
  while (x > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(x % 10)));
    x /= 10;
  }
  return s;
}

uint64_t gcd(uint64_t a, uint64_t b) {
  while (b != 0) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// p/q with digit strings p and q: reduced, then the exact decimal when q = 2^a 5^b, else "p/q". nullopt for q = 0.
std::optional<std::string> canonical_fraction(bool negative, std::string_view p, std::string_view q) {
  while (p.size() > 1 && p.front() == '0') p.remove_prefix(1);
  while (q.size() > 1 && q.front() == '0') q.remove_prefix(1);
  if (q == "0") return std::nullopt;
  if (p.size() > kMaxExactDigits || q.size() > kMaxExactDigits) {
    // Too long to reduce in 64 bits: compared as written (leading zeros dropped).
    return std::string(negative && p != "0" ? "-" : "") + std::string(p) + "/" + std::string(q);
  }
  uint64_t num = std::stoull(std::string(p)), den = std::stoull(std::string(q));
  uint64_t g = gcd(num, den);
  num /= g;
  den /= g;
  if (num == 0) return "0";
  int twos = 0, fives = 0;
  uint64_t rest = den;
  while (rest % 2 == 0) rest /= 2, ++twos;
  while (rest % 5 == 0) rest /= 5, ++fives;
  std::string sign = negative ? "-" : "";
  if (rest != 1) return sign + std::to_string(num) + "/" + std::to_string(den);
  // num/den = num * 2^(k-twos) * 5^(k-fives) / 10^k; below 10^18 * 2^60 < 2^128.
  int k = twos > fives ? twos : fives;
  unsigned __int128 m = num;
  for (int i = twos; i < k; ++i) m *= 2;
  for (int i = fives; i < k; ++i) m *= 5;
  std::string digits = u128_to_string(m);
  if (static_cast<int>(digits.size()) <= k) digits.insert(0, static_cast<size_t>(k) + 1 - digits.size(), '0');
  std::string_view d = digits;
  return canonical_decimal(negative, d.substr(0, d.size() - k), d.substr(d.size() - k));
}

// A number token at s[i] (a digit, or '.' then a digit), without its sign: digits with optional "," thousands
// groups ("1,234,567"), an optional ".digits", or an integer "/" integer fraction. `end` is one past it.
struct NumberToken {
  size_t end = 0;
  std::optional<std::string> value;  // canonical, unsigned; nullopt for a zero denominator
};

bool starts_number(std::string_view s, size_t i) {
  return i < s.size() && (is_digit(s[i]) || (s[i] == '.' && i + 1 < s.size() && is_digit(s[i + 1])));
}

size_t digits_end(std::string_view s, size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}

NumberToken read_number(std::string_view s, size_t i, bool negative) {
  NumberToken t;
  size_t j = digits_end(s, i);
  std::string integer(s.substr(i, j - i));
  // Thousands groups: a first group of 1..3 digits, then ",ddd" groups of exactly three.
  if (!integer.empty() && integer.size() <= 3) {
    while (j + 4 <= s.size() && s[j] == ',' && digits_end(s, j + 1) == j + 4) {
      integer += s.substr(j + 1, 3);
      j += 4;
    }
  }
  if (j + 1 < s.size() && s[j] == '.' && is_digit(s[j + 1])) {
    size_t f = digits_end(s, j + 1);
    t.end = f;
    t.value = canonical_decimal(negative, integer, s.substr(j + 1, f - j - 1));
    return t;
  }
  if (!integer.empty() && j + 1 < s.size() && s[j] == '/' && is_digit(s[j + 1])) {
    size_t q = digits_end(s, j + 1);
    t.end = q;
    t.value = canonical_fraction(negative, integer, s.substr(j + 1, q - j - 1));
    return t;
  }
  t.end = j;
  t.value = canonical_decimal(negative, integer, "");
  return t;
}

// Strips wrappers that do not change an answer: surrounding whitespace, \boxed{...}, $...$, \(...\), \[...\],
// and one trailing '.'.
std::string_view unwrap(std::string_view s) {
  while (true) {
    std::string_view before = s;
    s = trim(s);
    if (!s.empty() && s.back() == '.') s.remove_suffix(1);
    s = trim(s);
    if (starts_with(s, "\\boxed{") && s.back() == '}') s = s.substr(7, s.size() - 8);
    if (s.size() >= 2 && s.front() == '$' && s.back() == '$' && s.substr(1, s.size() - 2).find('$') == s.npos)
      s = s.substr(1, s.size() - 2);
    if ((starts_with(s, "\\(") && s.substr(s.size() - 2) == "\\)") ||
        (starts_with(s, "\\[") && s.substr(s.size() - 2) == "\\]"))
      s = s.size() >= 4 ? s.substr(2, s.size() - 4) : std::string_view();
    if (s == before) return s;
  }
}

// What may follow a number that is a whole answer: nothing, a units word, a percent or degree sign,
// punctuation, or a LaTeX spacing/text command.
bool is_units_tail(std::string_view rest) {
  bool spaced = !rest.empty() && is_space(rest.front());
  rest = trim(rest);
  if (rest.empty()) return true;
  char c = rest.front();
  if (is_alpha(c) || c == '%' || c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?' ||
      c == ')' || (c == '(' && spaced))
    return true;
  if (starts_with(rest, kDegree) || starts_with(rest, "^\\circ") || starts_with(rest, "^{\\circ}")) return true;
  for (std::string_view command : {"\\%", "\\text", "\\mbox", "\\mathrm", "\\,", "\\;", "\\!", "\\ ", "\\quad"})
    if (starts_with(rest, command)) return true;
  return false;
}

// Reads a sign and then "$" (either order: "-$5", "$-5"); returns whether the value is negative.
bool read_sign_and_currency(std::string_view& s) {
  bool negative = false;
  auto sign = [&] {
    if (starts_with(s, "-")) {
      negative = true;
      s.remove_prefix(1);
    } else if (starts_with(s, kUnicodeMinus)) {
      negative = true;
      s.remove_prefix(kUnicodeMinus.size());
    } else if (starts_with(s, "+")) {
      s.remove_prefix(1);
    }
    s = trim(s);
  };
  sign();
  if (starts_with(s, "\\$")) s.remove_prefix(2);
  else if (starts_with(s, "$")) s.remove_prefix(1);
  s = trim(s);
  if (!negative) sign();
  return negative;
}

// "{digits}" at the front of s; advances s past it.
std::optional<std::string_view> braced_integer(std::string_view& s) {
  s = trim(s);
  if (!starts_with(s, "{")) return std::nullopt;
  size_t close = s.find('}');
  if (close == s.npos) return std::nullopt;
  std::string_view inner = trim(s.substr(1, close - 1));
  if (inner.empty() || digits_end(inner, 0) != inner.size()) return std::nullopt;
  s.remove_prefix(close + 1);
  return inner;
}

std::string canonical_text(std::string_view raw) {
  std::string_view s = unwrap(raw);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (is_space(s[i])) continue;
    bool skipped = false;
    for (std::string_view drop : {"\\left", "\\right", "\\!", "\\,", "\\;"}) {
      if (s.substr(i, drop.size()) == drop) {
        i += drop.size() - 1;
        skipped = true;
        break;
      }
    }
    if (skipped) continue;
    if (s.substr(i, 6) == "\\dfrac" || s.substr(i, 6) == "\\tfrac") {
      out += "\\frac";
      i += 5;
      continue;
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  }
  return out;
}

// The numeric value of a marked answer's text: the whole text as one number, else (for plain prose such as
// "The answer is 42.", not LaTeX) its last number.
std::optional<std::string> marked_number(std::string_view raw) {
  std::optional<std::string> whole = canonical_number(raw);
  if (whole || raw.find('\\') != raw.npos) return whole;
  return last_number(raw);
}

ExtractedAnswer make_answer(AnswerForm form, std::string_view raw, std::optional<std::string> number) {
  ExtractedAnswer a;
  a.form = form;
  a.raw = std::string(raw);
  a.number = std::move(number);
  a.text = canonical_text(raw);
  return a;
}

}  // namespace

std::optional<std::string_view> text_after_last_hashes(std::string_view text) {
  size_t pos = text.rfind("####");
  if (pos == text.npos) return std::nullopt;
  std::string_view rest = text.substr(pos + 4);
  while (!rest.empty() && rest.front() == '#') rest.remove_prefix(1);
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = trim(rest.substr(0, nl));
    if (!line.empty()) return line;
    if (nl == rest.npos) break;
    rest.remove_prefix(nl + 1);
  }
  return std::nullopt;
}

namespace {

// The content of the last \boxed{...} whose braces balance and whose content is not empty.
std::optional<std::string_view> last_boxed(std::string_view text) {
  std::optional<std::string_view> found;
  for (size_t pos = text.find("\\boxed"); pos != text.npos; pos = text.find("\\boxed", pos + 1)) {
    size_t i = pos + 6;
    while (i < text.size() && is_space(text[i])) ++i;
    if (i >= text.size() || text[i] != '{') continue;
    int depth = 0;
    size_t j = i;
    for (; j < text.size(); ++j) {
      if (text[j] == '{') ++depth;
      if (text[j] == '}' && --depth == 0) break;
    }
    if (j >= text.size()) continue;  // unbalanced
    std::string_view content = trim(text.substr(i + 1, j - i - 1));
    if (!content.empty()) found = content;
  }
  return found;
}

}  // namespace

const char* answer_form_name(AnswerForm form) {
  switch (form) {
    case AnswerForm::kNone: return "none";
    case AnswerForm::kHashes: return "####";
    case AnswerForm::kBoxed: return "boxed";
    case AnswerForm::kLastNumber: return "last number";
  }
  return "?";
}

std::optional<std::string> canonical_number(std::string_view answer) {
  std::string_view s = unwrap(answer);
  bool negative = read_sign_and_currency(s);
  for (std::string_view frac : {"\\frac", "\\dfrac", "\\tfrac"}) {
    if (!starts_with(s, frac)) continue;
    s.remove_prefix(frac.size());
    std::optional<std::string_view> p = braced_integer(s);
    std::optional<std::string_view> q = p ? braced_integer(s) : std::nullopt;
    if (!q || !is_units_tail(s)) return std::nullopt;
    return canonical_fraction(negative, *p, *q);
  }
  if (!starts_number(s, 0)) return std::nullopt;
  NumberToken t = read_number(s, 0, negative);
  if (!t.value || !is_units_tail(s.substr(t.end))) return std::nullopt;
  return t.value;
}

std::optional<std::string> last_number(std::string_view text) {
  std::optional<std::string> last;
  size_t i = 0;
  while (i < text.size()) {
    bool boundary = i == 0 || !is_digit(text[i - 1]);
    if (!boundary || !starts_number(text, i)) {
      ++i;
      continue;
    }
    // The sign: a '-' (or U+2212) right before the number or before its "$", not after a digit, letter or ')'.
    size_t j = i;
    if (j >= 2 && text.substr(j - 2, 2) == "\\$") j -= 2;
    else if (j >= 1 && text[j - 1] == '$') j -= 1;
    size_t minus = 0;
    if (j >= 1 && text[j - 1] == '-') minus = 1;
    else if (j >= kUnicodeMinus.size() && text.substr(j - kUnicodeMinus.size(), kUnicodeMinus.size()) == kUnicodeMinus)
      minus = kUnicodeMinus.size();
    bool negative = false;
    if (minus > 0) {
      size_t before = j - minus;
      negative = before == 0 || !(is_digit(text[before - 1]) || is_alpha(text[before - 1]) || text[before - 1] == ')');
    }
    NumberToken t = read_number(text, i, negative);
    if (t.value) last = t.value;
    i = t.end;
  }
  return last;
}

ExtractedAnswer extract_math_answer(std::string_view completion) {
  if (std::optional<std::string_view> line = text_after_last_hashes(completion))
    return make_answer(AnswerForm::kHashes, *line, marked_number(*line));
  if (std::optional<std::string_view> boxed = last_boxed(completion))
    return make_answer(AnswerForm::kBoxed, *boxed, marked_number(*boxed));
  if (std::optional<std::string> number = last_number(completion)) {
    ExtractedAnswer a;
    a.form = AnswerForm::kLastNumber;
    a.raw = *number;
    a.text = *number;
    a.number = std::move(number);
    return a;
  }
  return ExtractedAnswer{};
}

std::string math_reference_mismatch(std::string_view reference) {
  ExtractedAnswer marked = extract_math_answer(reference);
  if (marked.marked()) return "";
  if (canonical_number(reference)) return "";
  return "the 'math' scorer needs a reference answer that ends with \"#### ANSWER\", contains \\boxed{ANSWER}, "
         "or is one number (like 42, -3.5, 1/2)";
}

ExtractedAnswer reference_math_answer(std::string_view reference) {
  ExtractedAnswer marked = extract_math_answer(reference);
  if (marked.marked()) return marked;
  std::optional<std::string> whole = canonical_number(reference);
  RLCPP_CHECK(whole, "reference answer \"" << reference << "\": " << math_reference_mismatch(reference));
  ExtractedAnswer a;
  a.form = AnswerForm::kLastNumber;
  a.raw = std::string(trim(reference));
  a.text = canonical_text(reference);
  a.number = std::move(whole);
  return a;
}

bool math_answers_equal(const ExtractedAnswer& reference, const ExtractedAnswer& response) {
  if (!reference.found() || !response.found()) return false;
  if (reference.number) return response.number && *response.number == *reference.number;
  return !reference.text.empty() && response.text == reference.text;
}

}  // namespace rlcpp
