// The report of `rlcpp mismatch` (mismatch/mismatch_sweep.h): each point's run directory read back
// (report/run_records.h), its figures averaged over its steps, OUT/report.md (mismatch/mismatch_report_markdown.h),
// OUT/plots/plot_data.json, then scripts/plot_mismatch.py (matplotlib) draws OUT/plots/*.png from that file;
// the script only draws.
#pragma once

#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "mismatch/mismatch_sweep.h"
#include "report/run_records.h"

namespace rlcpp {

// A column of the per-source tables: a metrics.jsonl key, its header, and the significant digits it is shown with.
struct MismatchColumn {
  std::string key;
  std::string header;
  int digits = 3;
};

// mismatch/max_abs_dlogp, rollout_corr/{kl, k3_kl, full_tv, chi2_token, probs_diff_mean, is_ess,
// ratio_outside_frac}, probe/max_abs_dlogp (the sync check), probe_trainer/max_abs_dlogp, weight_sync/rel_rms_err.
const std::vector<MismatchColumn>& mismatch_table_columns();

// What a correction did in the loss (the update's own figures, averaged likewise): actor/rollout_corr/
// {is_weight_mean, masked_frac, seq_masked_frac}; present only in points with a correction on.
const std::vector<MismatchColumn>& mismatch_correction_columns();

// The rollout-probability buckets of rollout_corr/bucket/<label>/ (trainer/rollout_corr_metrics.h) and the
// figures of each that the report uses: kl, k3_kl, probs_diff_mean, tokens.
const std::vector<std::string>& mismatch_bucket_labels();
const std::vector<std::string>& mismatch_bucket_figures();

// One point's figures: the mean over its steps (those that have the figure) of every table and correction column
// and of every bucket figure ("rollout_corr/bucket/<label>/<figure>"); absent from `mean` when no step has it. NaN where absent.
struct MismatchPointFigures {
  std::string name, source, run_dir, error;
  Json set;
  int64_t steps_configured = 0;
  int64_t steps_recorded = 0;  // records in metrics.jsonl (0: no run directory could be read)
  double seconds = 0;          // the point's wall time in the sweep (warm start excluded)
  std::map<std::string, double> mean;
  double final_accuracy = std::numeric_limits<double>::quiet_NaN();  // eval/accuracy of the last evaluation
  double best_accuracy = std::numeric_limits<double>::quiet_NaN();
  double step_seconds = std::numeric_limits<double>::quiet_NaN();      // mean timing_s/step
  double old_logprob_share = std::numeric_limits<double>::quiet_NaN(); // sum timing_s/old_logprob / sum timing_s/step
  // Where it enters (report/mismatch_section.h): the first stage past probe.layer_threshold most probes gave ("" for
  // none) and in how many, and each stage's max |Δ| (mean over the probes); empty without a stage comparison.
  std::string first_stage;
  int64_t first_stage_steps = 0;
  std::vector<std::pair<std::string, double>> stage_max_abs;
};

// `layers`: the model's (names the stages); < 0 leaves the stage figures out.
MismatchPointFigures mismatch_point_figures(const RunRecords& run, int64_t layers = -1);

// The PNGs plot_mismatch.py draws: bucket_mismatch, k3_kl, mismatch_steps (k3 and full-vocabulary TV over the
// steps), mismatch_stages (where it enters, per point), accuracy.
const std::vector<std::string>& mismatch_plot_names();

// plots/plot_data.json: {"sweep_file", "baseline", "start_accuracy" (the shared warm start's, or null), "buckets": [labels], "bucket_figures": [...], "points": [{"name",
// "source", "failed", "summary": {column key: mean or null, ...}, "bucket": {figure: [mean per bucket or null]},
// "step": [...], "k3_kl": [...], "max_abs_dlogp": [...], "eval": {"step": [...], "accuracy": [...]},
// "label" (= name), "mismatch_section" (report/mismatch_section.h's series of the point's run)}]}.
Json mismatch_plot_data(const SweepResult& sweep, const std::vector<MismatchPointFigures>& figures,
                        const std::vector<RunRecords>& runs);

struct MismatchReportOptions {
  std::string plot_script;  // scripts/plot_mismatch.py
  std::string python = "/usr/bin/python3";
};

struct MismatchReportFiles {
  std::string report;              // OUT/report.md
  std::string plot_data;           // OUT/plots/plot_data.json
  std::vector<std::string> plots;  // OUT/plots/<name>.png in mismatch_plot_names() order
};

// Reads every point's run back and writes the report into sweep.out_dir. A failed point is listed with its
// error (and its recorded steps, if any); the plots failing is an error naming the script and what it printed.
MismatchReportFiles write_mismatch_report(const SweepResult& sweep, const MismatchReportOptions& options);

}  // namespace rlcpp
