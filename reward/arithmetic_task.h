// add / sub / mul on two operands of `digits` decimal digits: prompt "a+b=", answer str(a op b).
// Training operands are uniform in [0, 10^digits - 1], or length-balanced: each operand's digit count uniform
// in 1..digits, then its value uniform among the numbers of that many digits (0..9 for one digit) — the same
// pairs, weighted so that short operands, ~1 % of uniform pairs each, are a third of the draws. The held-out
// set is always uniform. Split key: a * 10^digits + b, so add3's test pairs are exactly
// those of docs/benchmarks.md (splitmix64(a*1000 + b) % 10 == 0); sub and mul of the same width hold out the
// same (a, b) pairs.
#pragma once

#include <cstdint>

#include "reward/scorers.h"
#include "reward/task.h"

namespace rlcpp {

enum class ArithmeticOp { kAdd, kSub, kMul };
enum class OperandSampling { kUniform, kLengthBalanced };

class ArithmeticTask : public Task {
 public:
  // digits in [1, 9] (the split key and a product then fit in 64 bits). The format scorer's "well-formed"
  // admits a leading "-" only for sub, whose answers can be negative.
  ArithmeticTask(ArithmeticOp op, int64_t digits, uint64_t eval_seed, ScorerSpec scorer,
                 OperandSampling sampling = OperandSampling::kUniform);

  std::string name() const override;
  Problem sample_train(PhiloxStream& rng) const override;
  std::vector<Problem> eval_set(int64_t n) const override;
  bool is_test(const Problem& problem) const override;
  RewardResult score(const Problem& problem, const std::string& response, bool terminated) const override;
  int64_t max_new_tokens() const override;
  std::string alphabet() const override;
  // The operands' digit counts around the operator, e.g. "3+2" for 422+92.
  std::string problem_class(const Problem& problem) const override;

  Problem make_problem(uint64_t a, uint64_t b) const;
  uint64_t split_key(uint64_t a, uint64_t b) const { return a * base_ + b; }
  // Number of (a, b) pairs in the test split, counted exactly.
  int64_t count_test_pairs() const;

 private:
  char op_char() const;
  uint64_t draw_operand(PhiloxStream& rng) const;

  ArithmeticOp op_;
  int64_t digits_;
  uint64_t base_;  // 10^digits: operands are in [0, base_)
  uint64_t eval_seed_;
  ScorerSpec scorer_;
  OperandSampling sampling_;
};

}  // namespace rlcpp
