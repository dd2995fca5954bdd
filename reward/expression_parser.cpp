#include "reward/expression_parser.h"

#include <limits>
#include <sstream>

namespace rlcpp {
namespace {

using Wide = __int128;

Wide wide_gcd(Wide a, Wide b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    Wide t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// A value, or the first arithmetic error met while computing it (parsing continues past it so that a later
// syntax error still wins).
struct Value {
  Rational r;
  ExpressionStatus status = ExpressionStatus::kOk;
};

// Exact num/den (den != 0) reduced into a Rational, or kOverflow if it does not fit in int64.
Value reduce(Wide num, Wide den) {
  if (den < 0) {
    num = -num;
    den = -den;
  }
  Wide g = wide_gcd(num, den);
  if (g > 1) {
    num /= g;
    den /= g;
  }
  constexpr Wide kMax = std::numeric_limits<int64_t>::max();
  if (num > kMax || num < -kMax || den > kMax) return Value{{}, ExpressionStatus::kOverflow};
  return Value{{static_cast<int64_t>(num), static_cast<int64_t>(den)}, ExpressionStatus::kOk};
}

// Operands below 2^63 in magnitude keep every product below 2^126 and every sum of two below 2^127.
Value apply(char op, const Value& x, const Value& y) {
  if (x.status != ExpressionStatus::kOk) return x;
  if (y.status != ExpressionStatus::kOk) return y;
  Wide an = x.r.num, ad = x.r.den, bn = y.r.num, bd = y.r.den;
  switch (op) {
    case '+': return reduce(an * bd + bn * ad, ad * bd);
    case '-': return reduce(an * bd - bn * ad, ad * bd);
    case '*': return reduce(an * bn, ad * bd);
    default:
      if (bn == 0) return Value{{}, ExpressionStatus::kDivisionByZero};
      return reduce(an * bd, ad * bn);
  }
}

struct SyntaxAbort {
  ExpressionStatus status;
  std::string message;
};

class Parser {
 public:
  Parser(std::string_view text, const ExpressionLimits& limits, std::vector<std::string>& literals)
      : s_(text), limits_(limits), literals_(literals) {}

  Value parse_all() {
    skip_spaces();
    if (pos_ == s_.size()) fail("empty expression");
    Value v = expr();
    skip_spaces();
    if (pos_ != s_.size()) fail_here("expected an operator or the end");
    return v;
  }

 private:
  Value expr() {
    Value v = term();
    while (true) {
      skip_spaces();
      if (pos_ == s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) return v;
      char op = s_[pos_++];
      v = apply(op, v, term());
    }
  }

  Value term() {
    Value v = factor();
    while (true) {
      skip_spaces();
      if (pos_ == s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) return v;
      char op = s_[pos_++];
      v = apply(op, v, factor());
    }
  }

  Value factor() {
    skip_spaces();
    if (pos_ == s_.size()) fail("unexpected end, expected a number or '('");
    char c = s_[pos_];
    if (c == '(') {
      if (++depth_ > limits_.max_depth) {
        throw SyntaxAbort{ExpressionStatus::kTooDeep,
                          "parentheses nested deeper than " + std::to_string(limits_.max_depth) + " at offset " +
                              std::to_string(pos_)};
      }
      ++pos_;
      Value v = expr();
      skip_spaces();
      if (pos_ == s_.size() || s_[pos_] != ')') fail_here("expected ')'");
      ++pos_;
      --depth_;
      return v;
    }
    if (c >= '0' && c <= '9') return number();
    fail_here("expected a number or '('");
  }

  Value number() {
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    std::string_view digits = s_.substr(start, pos_ - start);
    if (digits.size() > 1 && digits[0] == '0') {
      pos_ = start;
      fail_here("number with a leading zero");
    }
    literals_.emplace_back(digits);
    // 18 digits always fit in int64; longer literals are well-formed but too large to compute with.
    if (digits.size() > 18) return Value{{}, ExpressionStatus::kOverflow};
    int64_t x = 0;
    for (char d : digits) x = x * 10 + (d - '0');
    return Value{{x, 1}, ExpressionStatus::kOk};
  }

  void skip_spaces() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }

  [[noreturn]] void fail(const std::string& what) {
    throw SyntaxAbort{ExpressionStatus::kSyntaxError, what + " at offset " + std::to_string(pos_)};
  }

  [[noreturn]] void fail_here(const std::string& what) {
    if (pos_ == s_.size()) fail(what + ", got the end");
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    std::ostringstream os;
    if (c >= 0x20 && c < 0x7f) {
      os << what << ", got '" << static_cast<char>(c) << "'";
    } else {
      os << what << ", got byte 0x" << std::hex << static_cast<int>(c);
    }
    fail(os.str());
  }

  std::string_view s_;
  const ExpressionLimits& limits_;
  std::vector<std::string>& literals_;
  size_t pos_ = 0;
  int64_t depth_ = 0;
};

const char* arithmetic_error(ExpressionStatus status) {
  return status == ExpressionStatus::kDivisionByZero ? "division by zero"
                                                     : "a number or intermediate value does not fit in 64 bits";
}

}  // namespace

ExpressionResult evaluate_expression(std::string_view text, const ExpressionLimits& limits) {
  ExpressionResult result;
  if (static_cast<int64_t>(text.size()) > limits.max_length) {
    result.status = ExpressionStatus::kSyntaxError;
    result.error = "expression of " + std::to_string(text.size()) + " characters is longer than " +
                   std::to_string(limits.max_length);
    return result;
  }
  try {
    Parser parser(text, limits, result.literals);
    Value v = parser.parse_all();
    result.status = v.status;
    if (v.status == ExpressionStatus::kOk) {
      result.value = v.r;
    } else {
      result.error = arithmetic_error(v.status);
    }
  } catch (const SyntaxAbort& abort) {
    result.status = abort.status;
    result.error = abort.message;
    result.literals.clear();
  }
  return result;
}

}  // namespace rlcpp
