#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "apps/commands.h"
#include "bench/bench_common.h"
#include "loop/start_ledger.h"
#include "report/run_report.h"

namespace rlcpp::cli {

namespace {

// $RLCPP_PYTHON, else Debian's python3 (where python3-matplotlib lives; a pyenv `python3` on PATH may lack it),
// else whatever `python3` the PATH finds.
std::string report_python() {
  if (const char* env = std::getenv("RLCPP_PYTHON"); env != nullptr && *env != '\0') return env;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

Command add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report", "report.md and plots/*.png of a `rlcpp train` run, or of several runs overlaid (--out DIR)");
  auto options = std::make_shared<ReportOptions>();
  cmd->add_option("runs", options->run_dirs, "run directories (each holds metrics.jsonl)")->required();
  cmd->add_option("--out", options->out_dir,
                  "output directory (default: the run directory; required with several runs)");
  return {cmd, [=]() {
    ReportOptions o = *options;
    o.plot_script = bench::source_dir() + "/scripts/plot_report.py";
    o.python = report_python();
    o.measure_machine = measure_machine_figures;
    const ReportFiles files = write_run_report(o);
    std::printf("report: %s\n", files.report.c_str());
    for (const std::string& png : files.plots) std::printf("  %s\n", png.c_str());
    return 0;
  }};
}

}  // namespace rlcpp::cli
