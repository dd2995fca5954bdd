// Final-answer extraction for math word problems (the `math` scorer): finds the answer a completion gives and
// reduces it to a canonical form, so "#### $1,234.50", "\boxed{1234.5}" and "1234.50 dollars" compare equal.
//
// Where the answer is taken from, first match wins:
//   1. the text after the last "####" on its line (GSM8K); an empty rest of line takes the next non-empty line;
//   2. the content of the last "\boxed{...}" whose braces balance (nested braces are kept: \boxed{\frac{1}{2}});
//   3. otherwise the last number anywhere in the text.
// Forms 1 and 2 are "marked" (what the format reward asks for); form 3 is a fallback that can still be correct.
//
// Canonical values: a number is its exact decimal with no leading or trailing zeros ("3.50" -> "3.5",
// "-0" -> "0", "1,234" -> "1234"), a fraction p/q (also \frac{p}{q}, \dfrac, \tfrac) is reduced and written as
// that decimal when q has only the factors 2 and 5 ("1/2" -> "0.5"), else as "p/q" ("2/6" -> "1/3"). A
// leading "$" and units words after the number ("42 apples", "50%", "12 \text{ cm}") are ignored. Non-numeric
// answers compare as text, lower-cased with whitespace and a trailing '.' removed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rlcpp {

enum class AnswerForm { kNone, kHashes, kBoxed, kLastNumber };

const char* answer_form_name(AnswerForm form);

struct ExtractedAnswer {
  AnswerForm form = AnswerForm::kNone;
  std::string raw;                    // the answer text as written (the line after ####, the boxed content)
  std::optional<std::string> number;  // its canonical numeric value, when it has one
  std::string text;                   // its canonical text (compared when the reference is not a number)
  bool found() const { return form != AnswerForm::kNone; }
  bool marked() const { return form == AnswerForm::kHashes || form == AnswerForm::kBoxed; }
};

// The canonical numeric value of a whole answer string ("$1,234", "-3.50", "7/14", "\frac{1}{2}",
// "42 apples"), or nullopt when it is not one number (then the text form is compared).
std::optional<std::string> canonical_number(std::string_view answer);

// The last number in free text, canonical; a '-' counts as a sign only when not preceded by a digit, a
// letter or ')' ("10-3" is 3, "it is -3" is -3). nullopt when the text has no digit.
std::optional<std::string> last_number(std::string_view text);

// The trimmed text after the last "####": the rest of its line, or the next non-empty line when that is
// empty; nullopt when there is no "####" or nothing follows it.
std::optional<std::string_view> text_after_last_hashes(std::string_view text);

// Extracts the answer of a completion (see the top of this file).
ExtractedAnswer extract_math_answer(std::string_view completion);

// The answer of a reference: marked ("... #### 28" or "\boxed{28}"), or the whole text as one number
// ("28", "0.5", "\frac{1}{3}"). Throws naming the reference when it is neither.
ExtractedAnswer reference_math_answer(std::string_view reference);

// "" when `reference` can be a math reference answer, else why not.
std::string math_reference_mismatch(std::string_view reference);

// Whether `response` states the reference's answer: numerically when the reference is a number, else as text.
bool math_answers_equal(const ExtractedAnswer& reference, const ExtractedAnswer& response);

}  // namespace rlcpp
