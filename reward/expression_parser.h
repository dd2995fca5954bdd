// A small, safe evaluator for countdown answers: recursive descent over integers, + - * / and parentheses,
// in exact rational arithmetic. Nothing is ever handed to a shell or an eval.
//
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/') factor)*
//   factor := number | '(' expr ')'
//   number := '0' | [1-9][0-9]*
//
// Spaces may separate tokens. There are no unary operators ("-3", "+3") and no leading zeros ("07"): the
// countdown rules only combine the given numbers with binary operations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlcpp {

// num / den in lowest terms with den > 0.
struct Rational {
  int64_t num = 0;
  int64_t den = 1;
  bool operator==(const Rational&) const = default;
  bool is_integer() const { return den == 1; }
};

enum class ExpressionStatus {
  kOk,
  kSyntaxError,     // not an expression of the grammar (or longer than max_length)
  kTooDeep,         // parentheses nested deeper than max_depth
  kDivisionByZero,  // well-formed, but some division has a zero divisor
  kOverflow,        // well-formed, but a literal or an intermediate value does not fit in 64 bits
};

struct ExpressionLimits {
  int64_t max_depth = 16;    // parenthesis nesting; bounds the recursion
  int64_t max_length = 256;  // characters
};

struct ExpressionResult {
  ExpressionStatus status = ExpressionStatus::kSyntaxError;
  std::string error;                  // what went wrong and at which character offset ("" when kOk)
  Rational value;                     // valid when status == kOk
  std::vector<std::string> literals;  // the numbers as written, in order; complete when well_formed()
  // The text is an expression of the grammar; its value may still be undefined.
  bool well_formed() const {
    return status == ExpressionStatus::kOk || status == ExpressionStatus::kDivisionByZero ||
           status == ExpressionStatus::kOverflow;
  }
};

ExpressionResult evaluate_expression(std::string_view text, const ExpressionLimits& limits = {});

}  // namespace rlcpp
