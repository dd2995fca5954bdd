// `rlcpp report RUN_DIR [RUN_DIR...]`: report.md and plots/*.png of one run, or of several overlaid. The C++
// side reads the runs (report/run_records.h), computes every series and the ledger (report/run_ledger.h), writes
// OUT/plots/plot_data.json and report.md, then runs scripts/plot_report.py (matplotlib) on the data file; the
// script only draws.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "report/ledger.h"
#include "report/run_records.h"

namespace rlcpp {

struct ReportOptions {
  std::vector<std::string> run_dirs;  // one or more `rlcpp train` run directories
  std::string out_dir;                // "" = the run's own directory (one run only)
  std::string plot_script;            // scripts/plot_report.py
  std::string python = "/usr/bin/python3";
  // This machine's yardsticks, for a run whose ledger.json has none (null: those ledger lines stay "—"). The
  // CLI passes loop/start_ledger.h's measure_machine_figures.
  std::function<MachineFigures()> measure_machine;
};

struct ReportFiles {
  std::string report;               // OUT/report.md
  // OUT/plots/<name>.png, in report_plot_names() order, then report_mismatch_plot_names() when some run has a
  // mismatch (report/mismatch_section.h)
  std::vector<std::string> plots;
};

// The PNGs plot_report.py draws: reward, accuracy, phase_shares, throughput, mismatch, response_length, memory,
// agent (an agent run's turns and tool calls per episode; a note elsewhere).
const std::vector<std::string>& report_plot_names();

// The step phases grouped as the report shows them: rollout, env, reward, logprobs (old_logprob, mismatch,
// ref_logprob, values), update (advantage, update_actor, update_critic), sync (weight_sync, probe),
// eval + checkpoint, other.
struct PhaseGroup {
  std::string name;
  std::vector<std::string> phases;
};
const std::vector<PhaseGroup>& report_phase_groups();

// One run's plot data: {"label", "step", "elapsed_s", "reward_mean", "eval": {step, elapsed_s, accuracy},
// "phases": {"names", "shares" [group][step]}, "rollout_tokens_per_s" (tokens/sampled over
// timing_s/rollout_draws), "train_tokens_per_s" (tokens/trained over timing_s/update_actor),
// "mismatch": {metric: {"rollout": [...], "probe": [...]}}, "response_length": {mean, min, max, p50, p90},
// "sampled_lengths": {step, tokens}, "rss_bytes", "peak_rss_bytes", "training_memory_formula_bytes",
// "mismatch_section" (report/mismatch_section.h)}; null where a step lacks the figure.
Json report_series(const RunRecords& run, const ModelConfig& model, double training_memory_formula_bytes);

// Writes the report; errors name the run directory, file and line at fault, or the plotting script's output.
ReportFiles write_run_report(const ReportOptions& options);

}  // namespace rlcpp
