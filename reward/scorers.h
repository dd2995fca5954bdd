// Answer scorers shared by the tasks whose reference answer is a string: exact match, TinyZero's format
// score, and numeric tolerance. Each takes the response text before EOS and whether EOS was emitted; a
// response that was cut off by the token limit is never correct.
#pragma once

#include <string>
#include <string_view>

#include "reward/reward_result.h"

namespace rlcpp {

enum class ScorerKind {
  kFormat,   // 1.0 exact answer then EOS; format_score a well-formed integer then EOS but wrong; 0 otherwise
  kExact,    // 1.0 exact answer then EOS; 0 otherwise
  kNumeric,  // 1.0 a decimal number within `tolerance` of the answer then EOS; 0 otherwise
  kMath,     // final answer extracted from free text (math_answer.h): 1.0 equal to the reference's then EOS;
             // format_score an answer marked with "####" or \boxed{} then EOS but wrong; 0 otherwise
};

// "format" | "exact" | "numeric" | "math"; anything else is an error naming `key_path` and the valid names.
ScorerKind parse_scorer_kind(const std::string& name, const std::string& key_path);
const char* scorer_kind_name(ScorerKind kind);

struct ScorerSpec {
  ScorerKind kind = ScorerKind::kFormat;
  double format_score = 0.1;    // kFormat, kMath: reward of a well-formed but wrong answer
  double tolerance = 0.0;       // kNumeric: absolute tolerance; 0 compares decimal values exactly
  bool allow_negative = false;  // kFormat: whether "-" then digits is well-formed (tasks with negative answers)
};

// Canonical decimal integer, exactly as Python's str(int) prints it: "0" or [1-9][0-9]* of any length, and
// with allow_negative also "-" [1-9][0-9]*. No sign "+", no "-0", no leading zeros, no whitespace.
bool is_canonical_integer(std::string_view s, bool allow_negative);

// Plain decimal number: -?[0-9]+(\.[0-9]+)? (leading zeros allowed, no exponent, no whitespace).
bool is_decimal_number(std::string_view s);

// Exact value equality of two strings accepted by is_decimal_number, of any length ("007" == "7.0", "-0" == "0").
bool decimal_equal(std::string_view a, std::string_view b);

RewardResult score_exact(std::string_view answer, std::string_view response, bool terminated);
RewardResult score_format(std::string_view answer, std::string_view response, bool terminated, bool allow_negative,
                          double format_score);
RewardResult score_numeric(std::string_view answer, std::string_view response, bool terminated, double tolerance);
// `answer` is a reference accepted by math_reference_mismatch: a worked solution ending in "#### N", a
// \boxed{} answer, or one number. Components: correct, well_formed (the response marks its answer with "####"
// or \boxed{}), terminated, answer_found (an answer was extracted at all, the last-number fallback included).
RewardResult score_math(std::string_view answer, std::string_view response, bool terminated, double format_score);

RewardResult score_answer(const ScorerSpec& spec, std::string_view answer, std::string_view response,
                          bool terminated);

// Why `answer` cannot be a reference answer under `spec` ("" when it can): the format scorer needs a canonical
// integer, the numeric scorer a decimal number, the math scorer an extractable final answer.
std::string answer_mismatch(const ScorerSpec& spec, std::string_view answer);

}  // namespace rlcpp
