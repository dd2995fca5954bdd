// Countdown as TinyZero defines it: 3 or 4 numbers in [1, 99] and a target; the answer is an expression that
// uses each number exactly once with + - * / and parentheses. Problems are built by combining the numbers in
// a random expression tree (natural-number intermediate results only), so every target is reachable.
//
// Prompt: the numbers in parentheses, then the target, then "=": "(63 20 70)13=". Reference answer: the
// generating expression with minimal parentheses: "63-(70-20)".
// Split key: the numbers sorted ascending packed in base 100, then * 1000 + target, so one puzzle (whatever
// the order its numbers are shown in) is on one side of the split.
//
// countdown_words (CountdownStyle::kWords) draws the same puzzles and states them in English: "Using the
// numbers 63, 20 and 70, each exactly once, with + - * / and parentheses, make 13. Put the final expression
// after ####." The reference answer is "#### 63-(70-20)"; the response's expression is the text after its last
// "####" (up to an optional "= value" and a trailing '.'), checked exactly as countdown checks its answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reward/scorers.h"
#include "reward/task.h"

namespace rlcpp {

enum class CountdownStyle {
  kCompact,  // "(63 20 70)13=" for the character tokenizer
  kWords,    // English prompt, the expression after "####"; free text, needs a tokenizer for any text
};

class CountdownTask : public Task {
 public:
  static constexpr int64_t kMinNumbers = 3;
  static constexpr int64_t kMaxNumbers = 4;
  static constexpr int64_t kMaxOperand = 99;  // numbers are in [1, kMaxOperand]
  static constexpr int64_t kMaxTarget = 100;  // targets are in [1, kMaxTarget]

  // scorer: kFormat (1.0 correct, format_score a well-formed expression that is wrong, 0 otherwise) or kExact
  // (1.0 or 0).
  CountdownTask(uint64_t eval_seed, ScorerSpec scorer, CountdownStyle style = CountdownStyle::kCompact);

  std::string name() const override { return style_ == CountdownStyle::kWords ? "countdown_words" : "countdown"; }
  Problem sample_train(PhiloxStream& rng) const override;
  std::vector<Problem> eval_set(int64_t n) const override;
  bool is_test(const Problem& problem) const override;
  // 1.0: terminated, well-formed, uses each number exactly once, value exactly the target (non-integer
  // intermediate results are fine: arithmetic is exact). format_score: terminated and well-formed but wrong
  // (wrong value, numbers unused or repeated, division by zero, overflow). 0: not terminated, empty,
  // not an expression, nested deeper than 16. kWords: the expression after the last "####"; no "####" is 0.
  RewardResult score(const Problem& problem, const std::string& response, bool terminated) const override;
  // kWords leaves room to reason before the "####" line.
  int64_t max_new_tokens() const override { return style_ == CountdownStyle::kWords ? 128 : 24; }
  // kWords: "" (any text).
  std::string alphabet() const override { return style_ == CountdownStyle::kWords ? "" : "0123456789+-*/() ="; }

  Problem make_problem(const std::vector<int64_t>& numbers, int64_t target, const std::string& solution) const;
  static uint64_t split_key(std::vector<int64_t> numbers, int64_t target);

 private:
  // A puzzle from `rng`, in either split.
  Problem draw(PhiloxStream& rng) const;

  // The score of `expression` (nullopt: no expression given, not well-formed).
  RewardResult score_expression(const Problem& problem, const std::optional<std::string>& expression,
                                bool terminated) const;

  uint64_t eval_seed_;
  ScorerSpec scorer_;
  CountdownStyle style_;
};

}  // namespace rlcpp
