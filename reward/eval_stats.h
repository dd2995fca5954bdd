// Statistics of an evaluation: each held-out problem is answered n times; from those samples come accuracy,
// mean reward, pass@k for every k <= n, and response length statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp {

struct SampleOutcome {
  double reward = 0.0;
  bool correct = false;
  int64_t response_length = 0;  // generated tokens, EOS included when emitted
};

struct LengthStats {
  double mean = 0.0;
  int64_t min = 0;
  int64_t max = 0;
  double p50 = 0.0;  // percentiles by linear interpolation between order statistics (numpy's default)
  double p90 = 0.0;
};

// Accuracy over the problems of one class (Task::problem_class).
struct ClassStats {
  std::string label;
  int64_t problems = 0;
  double accuracy = 0.0;  // over problems x samples
};

struct EvalStats {
  int64_t problems = 0;
  int64_t samples_per_problem = 0;  // n
  double accuracy = 0.0;            // mean correctness over all problems x samples
  double mean_reward = 0.0;
  std::vector<double> pass_at_k;    // pass_at_k[k - 1] for k = 1..n, averaged over problems
  LengthStats length;
  std::vector<ClassStats> classes;  // by label, in label order; empty when every problem's label is ""
};

// Unbiased pass@k for one problem with c correct out of n samples: 1 - C(n - c, k) / C(n, k), computed as a
// product so it neither overflows nor loses precision (Chen et al. 2021). Needs 0 <= c <= n, 1 <= k <= n.
double pass_at_k(int64_t n, int64_t c, int64_t k);

// The q-th percentile (q in [0, 100]) of `values` by linear interpolation; `values` need not be sorted.
double percentile(std::vector<int64_t> values, double q);

// `per_problem[i]` holds the n samples of problem i; every problem must have the same n >= 1. `labels`, when
// given, holds each problem's class (one per problem) for the per-class accuracies.
EvalStats compute_eval_stats(const std::vector<std::vector<SampleOutcome>>& per_problem,
                             const std::vector<std::string>& labels = {});

// {"problems", "samples_per_problem", "accuracy", "mean_reward", "pass@1", ..., "pass@n",
//  "response_length": {"mean", "min", "max", "p50", "p90"}} and, when there are classes,
//  "by_class": {label: {"problems", "accuracy"}}
Json eval_stats_to_json(const EvalStats& stats);

}  // namespace rlcpp
