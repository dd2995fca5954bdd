// The mismatch section of `rlcpp report` (report/run_report.h), and the per-point figures `rlcpp mismatch`
// shares with it (mismatch/mismatch_report.h): how far a run's rollout engine and trainer computed apart, read back
// from its metrics.jsonl (docs/mismatch.md has every figure's definition):
//   size        rollout_corr/k3_kl (each step's sampled tokens) and rollout_corr/full_tv (the whole next-token
//               distributions at the step's first samples) over the steps; probe_trainer/k3 and /full_tv, the
//               same on the fixed probe batch after each sync
//   where in the distribution   rollout_corr/bucket/<label>/{k3_kl, probs_diff_mean, tokens}: by the rollout's
//               probability of the token, with each bucket's share of the tokens and of the k3 sum
//   where it enters             probe_trainer/stage/<stage>/max_abs over the stages (embedding, each layer, final
//               norm, logits; model/forward_comparison.h) and probe_trainer/first_stage, the first past
//               probe.layer_threshold
// The probe/* figures are the sync check (engine against the trainer's forward in the engine's own numerics:
// 0 by design, whatever the numerics), never the mismatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "report/report_markdown.h"
#include "report/run_records.h"

namespace rlcpp {

// Some step measured a difference between the two computations: mismatch/max_abs_dlogp, rollout_corr/full_tv
// or probe_trainer/max_abs_dlogp recorded as anything but an exact 0.
bool run_has_mismatch(const RunRecords& run);

// The rollout-probability buckets the run's rollout_corr/bucket/<label>/ keys name, in ascending probability
// (p0.0-0.1, p0.1-0.5, ...).
std::vector<std::string> mismatch_bucket_labels_of(const std::vector<Json>& metrics);

// probe.layer_threshold of the run's config.json (the default 1e-3 when absent).
double probe_layer_threshold(const Json& config);

// One run's section data (plots/plot_data.json "mismatch_section"), null where a step or a bucket lacks a figure:
// {"present": run_has_mismatch, and when present: "k3_kl", "full_tv", "probe_k3", "probe_full_tv" [per step],
//  "buckets": {"labels", "k3_kl", "probs_diff_mean" [mean over the steps that have it], "token_share",
//  "k3_share" [share of the run's tokens, and of its k3 sum (k3_kl × tokens), per bucket]},
//  "stages": {"names" [embed, layer_0, ..., final_norm, logits], "max_abs" [mean over steps], "threshold",
//  "first_stage" (the name most steps gave, the earliest on a tie; null when none passed), "first_stage_steps"}}.
Json mismatch_section_series(const RunRecords& run, int64_t layers);

// "## Mismatch: size, where, where it enters" for the runs that have one (run_has_mismatch), with its plots
// (report_mismatch_plot_names); "" when none has.
std::string mismatch_section_markdown(const std::vector<ReportRun>& runs);

// The PNGs of the section, drawn when some run has a mismatch: mismatch_steps, mismatch_buckets, mismatch_stages.
const std::vector<std::string>& report_mismatch_plot_names();

}  // namespace rlcpp
