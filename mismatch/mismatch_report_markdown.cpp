#include "mismatch/mismatch_report_markdown.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/metrics.h"
#include "report/markdown_format.h"

namespace rlcpp {

namespace {

std::string percent(double share) { return format_percent(share, ""); }
std::string fixed(double v, int digits) { return format_fixed(v, digits, ""); }

double mean_or_nan(const MismatchPointFigures& f, const std::string& key) {
  const auto it = f.mean.find(key);
  return it == f.mean.end() ? std::nan("") : it->second;
}

std::string overrides_text(const Json& set) {
  if (!set.is_object() || set.empty()) return "—";
  std::string out;
  for (auto it = set.begin(); it != set.end(); ++it)
    out += (out.empty() ? "`" : ", `") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()) +
           "`";
  return out;
}

std::string row_label(const MismatchPointFigures& f, const std::string& baseline) {
  std::string label = f.name;
  if (f.name == baseline) label += " (baseline)";
  if (!f.error.empty()) label += " (failed)";
  return label;
}

void points_table(std::ostringstream& os, const SweepResult& sweep, const std::vector<MismatchPointFigures>& points) {
  os << "| point | source | overrides | steps run | wall time | run directory |\n"
        "| --- | --- | --- | ---: | ---: | --- |\n";
  for (const MismatchPointFigures& f : points)
    os << "| " << row_label(f, sweep.baseline) << " | " << f.source << " | " << overrides_text(f.set) << " | "
       << f.steps_recorded << " of " << f.steps_configured << " | " << format_duration(f.seconds) << " | `"
       << f.run_dir << "` |\n";
}

void source_table(std::ostringstream& os, const std::vector<const MismatchPointFigures*>& rows,
                  const std::string& baseline) {
  os << "| point |";
  for (const MismatchColumn& c : mismatch_table_columns()) os << " " << c.header << " |";
  os << " final acc | best acc | s/step | old_logprob share |\n| --- |";
  for (size_t i = 0; i < mismatch_table_columns().size() + 4; ++i) os << " ---: |";
  os << "\n";
  for (const MismatchPointFigures* f : rows) {
    os << "| " << row_label(*f, baseline) << " |";
    for (const MismatchColumn& c : mismatch_table_columns())
      os << " " << mismatch_cell(mean_or_nan(*f, c.key), c.digits) << " |";
    os << " " << percent(f->final_accuracy) << " | " << percent(f->best_accuracy) << " | "
       << fixed(f->step_seconds, 2) << " | " << percent(f->old_logprob_share) << " |\n";
  }
}

// The loss-side figures of the points that apply a correction (none: no table).
void correction_table(std::ostringstream& os, const std::vector<MismatchPointFigures>& points,
                      const std::string& baseline) {
  std::vector<const MismatchPointFigures*> rows;
  for (const MismatchPointFigures& f : points)
    for (const MismatchColumn& c : mismatch_correction_columns())
      if (f.mean.count(c.key) && (rows.empty() || rows.back() != &f)) rows.push_back(&f);
  if (rows.empty()) return;
  os << "\nWhat each correction did in the loss (mean over steps of `actor/rollout_corr/*`): the mean weight it put "
        "on a token's policy-gradient term (1 = none), and the shares of tokens and of sequences it masked out.\n\n"
        "| point |";
  for (const MismatchColumn& c : mismatch_correction_columns()) os << " " << c.header << " |";
  os << "\n| --- |";
  for (size_t i = 0; i < mismatch_correction_columns().size(); ++i) os << " ---: |";
  os << "\n";
  for (const MismatchPointFigures* f : rows) {
    os << "| " << row_label(*f, baseline) << " |";
    for (const MismatchColumn& c : mismatch_correction_columns())
      os << " " << mismatch_cell(mean_or_nan(*f, c.key), c.digits) << " |";
    os << "\n";
  }
}

void bucket_table(std::ostringstream& os, const std::vector<MismatchPointFigures>& points, const std::string& figure,
                  const std::string& baseline) {
  os << "| point |";
  for (const std::string& label : mismatch_bucket_labels()) os << " " << label << " |";
  os << "\n| --- |";
  for (size_t i = 0; i < mismatch_bucket_labels().size(); ++i) os << " ---: |";
  os << "\n";
  for (const MismatchPointFigures& f : points) {
    os << "| " << row_label(f, baseline) << " |";
    for (const std::string& label : mismatch_bucket_labels())
      os << " "
         << (figure == "tokens"
                 ? fixed(mean_or_nan(f, "rollout_corr/bucket/" + label + "/tokens"), 0)
                 : mismatch_cell(mean_or_nan(f, "rollout_corr/bucket/" + label + "/" + figure), 3))
         << " |";
    os << "\n";
  }
}

// Per point with a stage comparison: the first stage past the threshold and the stages' max |Δ|.
void where_it_enters(std::ostringstream& os, const std::vector<MismatchPointFigures>& points) {
  bool any = false;
  for (const MismatchPointFigures& f : points) {
    if (f.first_stage.empty() && f.stage_max_abs.empty()) continue;
    any = true;
    os << "- **" << f.name << "**: ";
    if (!f.first_stage.empty())
      os << "enters at `" << f.first_stage << "` (first past `probe.layer_threshold`, " << f.first_stage_steps
         << " of " << f.steps_recorded << " probes)";
    else
      os << "no stage passed `probe.layer_threshold`";
    os << "; max |Δ| after each stage:";
    for (size_t i = 0; i < f.stage_max_abs.size(); ++i)
      os << (i ? ", " : " ") << f.stage_max_abs[i].first << " " << mismatch_cell(f.stage_max_abs[i].second, 3);
    os << ".\n";
  }
  if (!any)
    os << "No point compared the two numerics stage by stage (the forward numerics were the same on both sides).\n";
}

}  // namespace

std::string mismatch_cell(double v, int digits) {
  if (!std::isfinite(v)) return "";
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string mismatch_report_markdown(const SweepResult& sweep, const std::vector<MismatchPointFigures>& points) {
  std::ostringstream os;
  os << "# rlcpp mismatch sweep: " << sweep.sweep_file << "\n\n"
     << "Written by `rlcpp mismatch` from each point's run directory (`metrics.jsonl`). " << points.size()
     << " short GRPO runs on the base config `" << sweep.base << "`, all from the same starting policy: ";
  if (sweep.warm_start_accuracy >= 0)
    os << "the shared SFT warm start `" << sweep.start_checkpoint << "` (held-out accuracy "
       << percent(sweep.warm_start_accuracy) << ", " << format_duration(sweep.warm_start_seconds) << ")";
  else if (!sweep.start_checkpoint.empty())
    os << "`" << sweep.start_checkpoint << "`";
  else
    os << "the base's random initialisation (same preset and seed)";
  os << ". Sweep wall time " << format_duration(sweep.seconds) << ". The plots are in `plots/`, their numbers in "
     << "`plots/plot_data.json`, the sweep as resolved in `sweep.json`.\n\n";
  points_table(os, sweep, points);

  bool any_failed = false;
  for (const MismatchPointFigures& f : points) any_failed = any_failed || !f.error.empty();
  if (any_failed) {
    os << "\n**Failed points** (their recorded steps, if any, are in the tables):\n\n";
    for (const MismatchPointFigures& f : points)
      if (!f.error.empty()) os << "- " << f.name << ": " << f.error << "\n";
  }

  os << "\n## Mismatch per source\n\n"
        "Each figure is the mean over the point's steps (those that have it; blank where none does). With q the "
        "rollout engine's log-prob of a sampled token and p the trainer's recomputation (old_logprob) of it, "
        "r = p − q and ρ = exp(r): **max |Δlogp|** the largest |r| of the step's batch; **kl** mean(q − p); "
        "**k3_kl** mean(ρ − 1 − r); **chi2_token** mean(ρ²) − 1; **probs_diff_mean** mean |exp(p) − exp(q)|; "
        "**full-vocab TV** ½ Σ|p − q| over the whole next-token distributions at the positions of each step's first "
        "samples (mixed numerics only); "
        "**is_ess** (Σρ)² / (N Σρ²); **ratio_outside_frac** the share of tokens with ρ outside "
        "[1/C, C] (`mismatch.ratio_bound`). **sync check**: after each sync a fixed batch (the probe) through the "
        "engine against the trainer's forward in the rollout's own numerics — 0 by design whatever the numerics, "
        "it says the sync landed exactly and is not the mismatch; **probe_trainer**: the same batch in the "
        "rollout's numerics against the trainer's (the numerics gap itself; only where they differ); "
        "**weight_sync rel_rms_err**: the relative RMS error of the rollout's prepared (rounded or quantised) "
        "weights against the fp32 master weights. A bypass point has no old_logprob pass (the rollout's "
        "log-probs are the old ones), so no per-step mismatch figures. Accuracy: greedy held-out exact match, "
        "the last evaluation and the best; s/step the mean step wall time; old_logprob share that phase's share "
        "of the run's step time.\n";
  std::vector<std::string> sources;
  for (const MismatchPointFigures& f : points) {
    bool seen = false;
    for (const std::string& s : sources) seen = seen || s == f.source;
    if (!seen) sources.push_back(f.source);
  }
  const MismatchPointFigures* baseline = nullptr;
  for (const MismatchPointFigures& f : points)
    if (f.name == sweep.baseline) baseline = &f;
  for (const std::string& source : sources) {
    std::vector<const MismatchPointFigures*> rows;
    if (baseline) rows.push_back(baseline);
    for (const MismatchPointFigures& f : points)
      if (f.source == source && &f != baseline) rows.push_back(&f);
    if (baseline && rows.size() == 1 && source == baseline->source) continue;  // the baseline alone: in every table
    os << "\n### " << source << "\n\n";
    source_table(os, rows, sweep.baseline);
  }
  correction_table(os, points, sweep.baseline);

  os << "\n## By rollout probability\n\n"
        "The same figures over the tokens whose rollout probability exp(q) falls in each bucket (mean over "
        "steps): where in the distribution the mismatch sits. Low-probability tokens carry the largest "
        "log-ratios; a bucket with no tokens in any step is blank.\n\n"
        "**kl** (mean q − p) by bucket:\n\n";
  bucket_table(os, points, "kl", sweep.baseline);
  os << "\n**probs_diff_mean** (mean |exp(p) − exp(q)|) by bucket:\n\n";
  bucket_table(os, points, "probs_diff_mean", sweep.baseline);
  os << "\nTokens per step in each bucket:\n\n";
  bucket_table(os, points, "tokens", sweep.baseline);
  os << "\n![Δlogp by probability bucket](plots/bucket_mismatch.png)\n\n"
        "Per bucket, one bar per point: kl (signed, symmetric-log axis), k3_kl and probs_diff_mean (log axes); "
        "a point at exactly 0 has no bar and is marked 0 at the foot of its slot.\n";

  os << "\n## Over steps\n\n![k3_kl over steps](plots/k3_kl.png)\n\n"
        "rollout_corr/k3_kl of each step, one line per point (log axis); points at exactly 0 in every step, "
        "and points without the figure, are named under the axes.\n";

  os << "\n![k3 KL and TV over steps](plots/mismatch_steps.png)\n\n"
        "k3 KL of each step's sampled tokens (solid) and of the probe batch (dashed), and the total variation of "
        "the whole next-token distributions (`rollout_corr/full_tv`, solid; `probe_trainer/full_tv`, dashed), for "
        "the points with a mismatch.\n";

  os << "\n## Where it enters\n\n";
  where_it_enters(os, points);
  os << "\n![where the mismatch enters](plots/mismatch_stages.png)\n\n"
        "The probe batch through the training forward in the rollout's numerics and in the trainer's, compared "
        "after every stage (embedding, each layer, final norm, logits; mean over the probes): where the difference "
        "appears and how it grows toward the logits; dotted, `probe.layer_threshold`.\n";

  os << "\n## Held-out accuracy\n\n![held-out accuracy](plots/accuracy.png)\n\n"
        "Greedy held-out accuracy of every point, every `eval_every` steps and at the end, on one axes (each "
        "in its rollout numerics). The points start from the same policy (the star at step 0: the shared warm "
        "start, evaluated in fp32), so the curves part only by what the point changes.\n";
  return os.str();
}

}  // namespace rlcpp
