#include "reward/scorers.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "reward/math_answer.h"

namespace rlcpp {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool all_digits(std::string_view s) {
  for (char c : s)
    if (!is_digit(c)) return false;
  return true;
}

// (negative, integer digits without leading zeros, fraction digits without trailing zeros); zero is positive.
struct CanonicalDecimal {
  bool negative = false;
  std::string_view integer;
  std::string_view fraction;
  bool operator==(const CanonicalDecimal&) const = default;
};

CanonicalDecimal canonical_decimal(std::string_view s) {
  CanonicalDecimal d;
  if (!s.empty() && s[0] == '-') {
    d.negative = true;
    s.remove_prefix(1);
  }
  size_t dot = s.find('.');
  std::string_view integer = s.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  while (!integer.empty() && integer.front() == '0') integer.remove_prefix(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  d.integer = integer;
  d.fraction = fraction;
  if (integer.empty() && fraction.empty()) d.negative = false;
  return d;
}

RewardResult make_result(double total, bool correct, bool well_formed, bool terminated) {
  RewardResult r;
  r.total = total;
  r.correct = correct;
  r.components = {{"correct", correct ? 1.0 : 0.0},
                  {"well_formed", well_formed ? 1.0 : 0.0},
                  {"terminated", terminated ? 1.0 : 0.0}};
  return r;
}

}  // namespace

ScorerKind parse_scorer_kind(const std::string& name, const std::string& key_path) {
  if (name == "format") return ScorerKind::kFormat;
  if (name == "exact") return ScorerKind::kExact;
  if (name == "numeric") return ScorerKind::kNumeric;
  if (name == "math") return ScorerKind::kMath;
  RLCPP_FAIL("config key '" << key_path << "': unknown scorer '" << name
                            << "' (expected \"format\", \"exact\", \"numeric\" or \"math\")");
}

const char* scorer_kind_name(ScorerKind kind) {
  switch (kind) {
    case ScorerKind::kFormat: return "format";
    case ScorerKind::kExact: return "exact";
    case ScorerKind::kNumeric: return "numeric";
    case ScorerKind::kMath: return "math";
  }
  return "?";
}

bool is_canonical_integer(std::string_view s, bool allow_negative) {
  if (allow_negative && !s.empty() && s[0] == '-') {
    s.remove_prefix(1);
    if (s == "0") return false;  // "-0" is not how an integer is printed
  }
  if (s.empty() || !all_digits(s)) return false;
  return s.size() == 1 || s[0] != '0';
}

bool is_decimal_number(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  size_t dot = s.find('.');
  std::string_view integer = s.substr(0, dot);
  if (integer.empty() || !all_digits(integer)) return false;
  if (dot == std::string_view::npos) return true;
  std::string_view fraction = s.substr(dot + 1);
  return !fraction.empty() && all_digits(fraction);
}

bool decimal_equal(std::string_view a, std::string_view b) {
  RLCPP_CHECK(is_decimal_number(a) && is_decimal_number(b),
              "decimal_equal: '" << a << "' or '" << b << "' is not a decimal number");
  return canonical_decimal(a) == canonical_decimal(b);
}

RewardResult score_exact(std::string_view answer, std::string_view response, bool terminated) {
  bool correct = terminated && response == answer;
  // Exact match has no answer format; "well_formed" then only says the model wrote something.
  return make_result(correct ? 1.0 : 0.0, correct, !response.empty(), terminated);
}

RewardResult score_format(std::string_view answer, std::string_view response, bool terminated, bool allow_negative,
                          double format_score) {
  bool well_formed = is_canonical_integer(response, allow_negative);
  bool correct = terminated && response == answer;
  double total = correct ? 1.0 : (terminated && well_formed ? format_score : 0.0);
  return make_result(total, correct, well_formed, terminated);
}

RewardResult score_numeric(std::string_view answer, std::string_view response, bool terminated, double tolerance) {
  bool well_formed = is_decimal_number(response);
  bool close = false;
  if (well_formed && is_decimal_number(answer)) {
    if (tolerance == 0.0) {
      close = decimal_equal(answer, response);  // exact for any number of digits, no double rounding
    } else {
      double x = std::strtod(std::string(response).c_str(), nullptr);
      double y = std::strtod(std::string(answer).c_str(), nullptr);
      // A value too long for a double overflows to inf and is then never within tolerance.
      close = std::isfinite(x) && std::isfinite(y) && std::fabs(x - y) <= tolerance;
    }
  }
  bool correct = terminated && close;
  return make_result(correct ? 1.0 : 0.0, correct, well_formed, terminated);
}

RewardResult score_math(std::string_view answer, std::string_view response, bool terminated, double format_score) {
  const ExtractedAnswer reference = reference_math_answer(answer);
  const ExtractedAnswer given = extract_math_answer(response);
  const bool well_formed = given.marked();
  const bool correct = terminated && math_answers_equal(reference, given);
  RewardResult r = make_result(correct ? 1.0 : (terminated && well_formed ? format_score : 0.0), correct, well_formed,
                               terminated);
  r.components.emplace_back("answer_found", given.found() ? 1.0 : 0.0);
  return r;
}

RewardResult score_answer(const ScorerSpec& spec, std::string_view answer, std::string_view response,
                          bool terminated) {
  switch (spec.kind) {
    case ScorerKind::kFormat: return score_format(answer, response, terminated, spec.allow_negative, spec.format_score);
    case ScorerKind::kExact: return score_exact(answer, response, terminated);
    case ScorerKind::kNumeric: return score_numeric(answer, response, terminated, spec.tolerance);
    case ScorerKind::kMath: return score_math(answer, response, terminated, spec.format_score);
  }
  RLCPP_FAIL("score_answer: unknown scorer kind " << static_cast<int>(spec.kind));
}

std::string answer_mismatch(const ScorerSpec& spec, std::string_view answer) {
  switch (spec.kind) {
    case ScorerKind::kFormat:
      if (!is_canonical_integer(answer, true))
        return "the 'format' scorer needs a canonical integer answer (like 42 or -7, no leading zeros); use "
               "scorer 'exact' for other answers, or 'math' for worked solutions ending in \"#### N\"";
      return "";
    case ScorerKind::kExact:
      return "";
    case ScorerKind::kNumeric:
      if (!is_decimal_number(answer))
        return "the 'numeric' scorer needs a decimal number answer (like 3, -2 or 0.25)";
      return "";
    case ScorerKind::kMath:
      return math_reference_mismatch(answer);
  }
  return "unknown scorer";
}

}  // namespace rlcpp
