// `rlcpp scale RUN_DIR`: the scaling model (report/scaling_model.h) fed by a run's measured step, as a table of
// predicted step times and rollout shares over rollout workers x trainer ranks, with what dominates each; and,
// for other runs of the same recipe on other layouts (--check), the model's prediction against what they
// measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlcpp {

struct ScalingOptions {
  std::string base_run;                     // the run whose step feeds the model
  std::vector<std::string> check_runs;      // runs to predict and compare
  std::vector<int64_t> workers = {1, 2, 4, 8, 16};
  std::vector<int64_t> ranks = {1, 2, 4, 8, 16};
  int64_t threads = 0;        // OpenMP threads of each process in the table; 0 = the base run's
  int64_t cores = -1;         // cores the table's processes share; -1 = the base run's machine, 0 = a cluster
  int async = -1;             // the table's mode: -1 = the base run's, 0 synchronous, 1 async
  double link_gbps = 0;       // GB/s of the all-reduce and weight-publish link; 0 = measured by a multi-rank
                              // base run, else 10
  int64_t skip_steps = 1;     // steps left out of the medians (the first warms up)
};

// The report's text (tables and notes). Throws naming the run and what is missing.
std::string scaling_report(const ScalingOptions& options);

}  // namespace rlcpp
