#include <cstdio>

#include "apps/commands.h"
#include "core/error.h"
#include "report/scaling_report.h"

namespace rlcpp::cli {

Command add_scale_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "scale", "predict a run's step time and rollout share as rollout workers and trainer ranks grow "
               "(docs/scaling.md), and check the model against other runs");
  auto o = std::make_shared<ScalingOptions>();
  cmd->add_option("run", o->base_run, "the run whose measured step feeds the model")->required();
  cmd->add_option("--check", o->check_runs, "runs of the same recipe on other layouts: predicted vs measured");
  cmd->add_option("--workers", o->workers, "rollout workers of the table (comma-separated)")->delimiter(',');
  cmd->add_option("--ranks", o->ranks, "trainer ranks of the table (comma-separated)")->delimiter(',');
  cmd->add_option("--threads", o->threads, "OpenMP threads of each process in the table (default: the run's)");
  cmd->add_option("--cores", o->cores,
                  "cores all processes share (default: the run's machine's; 0 = each process on cores of its own)");
  cmd->add_option("--async", o->async, "the table's mode: 1 async, 0 synchronous (default: the run's)");
  cmd->add_option("--link-gbps", o->link_gbps,
                  "GB/s of the all-reduce and weight-publish link (default: measured by a multi-rank run, else 10)");
  cmd->add_option("--skip-steps", o->skip_steps, "steps left out of the base (warm-up)");
  return {cmd, [=]() {
    RLCPP_CHECK(o->skip_steps >= 0 && o->threads >= 0 && o->cores >= -1 && o->link_gbps >= 0 && o->async >= -1 &&
                    o->async <= 1,
                "scale: --skip-steps, --threads, --link-gbps must be >= 0, --cores >= 0, --async 0 or 1");
    for (int64_t v : o->workers) RLCPP_CHECK(v >= 1 && v <= 65536, "scale: --workers must be in [1, 65536]");
    for (int64_t v : o->ranks) RLCPP_CHECK(v >= 1 && v <= 65536, "scale: --ranks must be in [1, 65536]");
    std::fputs(scaling_report(*o).c_str(), stdout);
    return 0;
  }};
}

}  // namespace rlcpp::cli
