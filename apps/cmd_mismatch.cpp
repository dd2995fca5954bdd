#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "apps/commands.h"
#include "bench/bench_common.h"
#include "core/metrics.h"
#include "mismatch/mismatch_report.h"
#include "mismatch/mismatch_sweep.h"

namespace rlcpp::cli {

namespace {

// As `rlcpp report` finds it: $RLCPP_PYTHON, else Debian's python3 (where python3-matplotlib lives), else the
// PATH's python3.
std::string plot_python() {
  if (const char* env = std::getenv("RLCPP_PYTHON"); env != nullptr && *env != '\0') return env;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

Command add_mismatch_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "mismatch", "a sweep of short GRPO runs over the rollout/trainer mismatch sources and corrections, from one "
                  "shared start, then OUT/report.md and OUT/plots/*.png (e.g. configs/mismatch_add3.json)");
  auto sweep_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<SweepOverrides>();
  cmd->add_option("sweep", *sweep_path, "sweep file (JSON: base, set, points, baseline, out)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", overrides->set,
                  "override a key of every point's config: --set rollout.prompts_per_step=64 (repeatable; a point's "
                  "own set still wins)");
  cmd->add_option("--out", overrides->out, "the sweep's directory (default: the sweep file's \"out\")");
  cmd->add_option("--steps", overrides->steps,
                  "RL steps of every point (default: as the sweep says; a point that sets steps keeps its own)")
      ->check(CLI::PositiveNumber);
  return {cmd, [=]() {
    const MismatchSweep sweep = load_mismatch_sweep(*sweep_path, *overrides);
    const SweepResult result = run_mismatch_sweep(sweep);
    MismatchReportOptions options;
    options.plot_script = bench::source_dir() + "/scripts/plot_mismatch.py";
    options.python = plot_python();
    const MismatchReportFiles files = write_mismatch_report(result, options);
    std::printf("mismatch: sweep done in %s\nreport: %s\n", format_duration(result.seconds).c_str(),
                files.report.c_str());
    for (const std::string& png : files.plots) std::printf("  %s\n", png.c_str());
    int failed = 0;
    for (const SweepPointResult& p : result.points) failed += p.error.empty() ? 0 : 1;
    if (failed > 0) {
      std::fprintf(stderr, "rlcpp: error: mismatch: %d of %zu points failed (see %s):\n", failed,
                   result.points.size(), files.report.c_str());
      for (const SweepPointResult& p : result.points)
        if (!p.error.empty()) std::fprintf(stderr, "  %s: %s\n", p.name.c_str(), p.error.c_str());
      return 1;
    }
    return 0;
  }};
}

}  // namespace rlcpp::cli
