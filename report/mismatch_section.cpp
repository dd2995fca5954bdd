#include "report/mismatch_section.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "model/forward_comparison.h"
#include "report/markdown_format.h"

namespace rlcpp {

namespace {

constexpr double kDefaultLayerThreshold = 1e-3;  // probe.layer_threshold's default (loop/consistency_probe_config.h)
const std::string kBucketPrefix = "rollout_corr/bucket/";

Json number_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json column(const std::vector<Json>& records, const std::string& key) {
  Json out = Json::array();
  for (const Json& r : records) out.push_back(number_or_null(record_number(r, key)));
  return out;
}

double max_over_steps(const std::vector<Json>& records, const std::string& key) {
  double m = NAN;
  for (const Json& r : records) {
    const double v = record_number(r, key);
    if (std::isfinite(v) && !(v <= m)) m = v;  // NaN at first
  }
  return m;
}

// `digits` significant digits; "—" when not measured, "0" when exactly 0.
std::string sig(double v, int digits = 3) {
  if (!std::isfinite(v)) return "—";
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string config_text(const Json& config, const std::string& section, const std::string& key) {
  if (!config.is_object() || !config.contains(section) || !config[section].is_object()) return "";
  const auto it = config[section].find(key);
  if (it == config[section].end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// "rollout bf16 + int8 weights / trainer fp32": the run's numerics as configured (and ", not batch-invariant
// (OpenBLAS decode)" with numerics.batch_invariant false).
std::string numerics_text(const Json& config) {
  std::string rollout = config_text(config, "rollout", "dtype");
  const std::string quantization = config_text(config, "rollout", "quantization");
  if (!quantization.empty() && quantization != "none") rollout += " + " + quantization + " weights";
  const std::string invariant = config_text(config, "numerics", "batch_invariant");
  return "rollout " + (rollout.empty() ? std::string("?") : rollout) + " / trainer " +
         config_text(config, "trainer", "dtype") +
         (invariant == "false" ? ", not batch-invariant (OpenBLAS decode)" : "");
}

}  // namespace

bool run_has_mismatch(const RunRecords& run) {
  for (const Json& r : run.metrics)
    for (const char* key : {"mismatch/max_abs_dlogp", "rollout_corr/full_tv", "probe_trainer/max_abs_dlogp"}) {
      if (!r.is_object() || !r.contains(key) || !r[key].is_number()) continue;
      const double v = r[key].get<double>();
      if (!(v == 0)) return true;  // any figure but an exact 0
    }
  return false;
}

std::vector<std::string> mismatch_bucket_labels_of(const std::vector<Json>& metrics) {
  std::vector<std::string> labels;
  for (const Json& r : metrics) {
    if (!r.is_object()) continue;
    for (auto it = r.begin(); it != r.end(); ++it) {
      if (it.key().rfind(kBucketPrefix, 0) != 0) continue;
      const std::string rest = it.key().substr(kBucketPrefix.size());
      const std::string label = rest.substr(0, rest.find('/'));
      if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
    }
  }
  // "p0.0-0.1" < "p0.1-0.5" < ...: the labels' own order is the probabilities'.
  std::sort(labels.begin(), labels.end());
  return labels;
}

double probe_layer_threshold(const Json& config) {
  if (config.is_object() && config.contains("probe") && config["probe"].is_object()) {
    const auto it = config["probe"].find("layer_threshold");
    if (it != config["probe"].end() && it->is_number()) return it->get<double>();
  }
  return kDefaultLayerThreshold;
}

Json mismatch_section_series(const RunRecords& run, int64_t layers) {
  const std::vector<Json>& m = run.metrics;
  Json s = {{"present", run_has_mismatch(run)}};
  if (!s["present"].get<bool>()) return s;
  s["k3_kl"] = column(m, "rollout_corr/k3_kl");
  s["full_tv"] = column(m, "rollout_corr/full_tv");
  s["probe_k3"] = column(m, "probe_trainer/k3");
  s["probe_full_tv"] = column(m, "probe_trainer/full_tv");

  const std::vector<std::string> labels = mismatch_bucket_labels_of(m);
  std::vector<double> tokens(labels.size(), 0.0), k3_sum(labels.size(), 0.0);
  Json k3 = Json::array(), diff = Json::array();
  for (size_t b = 0; b < labels.size(); ++b) {
    const std::string key = kBucketPrefix + labels[b] + "/";
    k3.push_back(number_or_null(mean_over_steps(m, key + "k3_kl")));
    diff.push_back(number_or_null(mean_over_steps(m, key + "probs_diff_mean")));
    for (const Json& r : m) {
      const double n = record_number(r, key + "tokens"), v = record_number(r, key + "k3_kl");
      if (!std::isfinite(n)) continue;
      tokens[b] += n;
      if (std::isfinite(v)) k3_sum[b] += v * n;  // a bucket without tokens has only `tokens`
    }
  }
  double all_tokens = 0, all_k3 = 0;
  for (size_t b = 0; b < labels.size(); ++b) all_tokens += tokens[b], all_k3 += k3_sum[b];
  Json token_share = Json::array(), k3_share = Json::array();
  for (size_t b = 0; b < labels.size(); ++b) {
    token_share.push_back(number_or_null(all_tokens > 0 ? tokens[b] / all_tokens : NAN));
    k3_share.push_back(number_or_null(all_k3 > 0 ? k3_sum[b] / all_k3 : NAN));
  }
  s["buckets"] = {{"labels", labels}, {"k3_kl", k3}, {"probs_diff_mean", diff}, {"token_share", token_share},
                  {"k3_share", k3_share}};

  Json names = Json::array(), max_abs = Json::array();
  for (int64_t stage = 0; stage < layers + 3; ++stage) {
    const std::string name = stage_name(stage, layers);
    names.push_back(name);
    max_abs.push_back(number_or_null(mean_over_steps(m, "probe_trainer/stage/" + name + "/max_abs")));
  }
  // The first stage past the threshold, as most probes saw it (the earliest on a tie).
  std::map<int64_t, int64_t> count;
  for (const Json& r : m) {
    const double first = record_number(r, "probe_trainer/first_stage");
    if (std::isfinite(first) && first >= 0) ++count[static_cast<int64_t>(first)];
  }
  Json first = nullptr;
  int64_t first_steps = 0;
  for (const auto& [stage, n] : count)
    if (n > first_steps) first = stage_name(stage, layers), first_steps = n;
  s["stages"] = {{"names", names},
                 {"max_abs", max_abs},
                 {"threshold", probe_layer_threshold(run.config)},
                 {"first_stage", first},
                 {"first_stage_steps", first_steps}};
  return s;
}

const std::vector<std::string>& report_mismatch_plot_names() {
  static const std::vector<std::string> kNames = {"mismatch_steps", "mismatch_buckets", "mismatch_stages"};
  return kNames;
}

namespace {

// A run with a mismatch and its section data.
struct RunSection {
  const ReportRun* run;
  Json series;  // mismatch_section_series
};

// One row per run: the size figures, where it enters, the sync check.
void size_table(std::ostringstream& os, const std::vector<RunSection>& with) {
  os << "| run | numerics | k3 KL (mean) | full-vocabulary TV (mean) | max \\|Δlogp\\| (largest) | is_ess (mean) | "
        "probe batch: k3 / TV (mean) | first stage past the threshold | sync check: probe max \\|Δlogp\\| |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n";
  for (const RunSection& r : with) {
    const std::vector<Json>& m = r.run->records.metrics;
    const Json& stages = r.series["stages"];
    std::string first = "none";
    if (!stages["first_stage"].is_null())
      first = "`" + stages["first_stage"].get<std::string>() + "` (" +
              std::to_string(stages["first_stage_steps"].get<int64_t>()) + " of " + std::to_string(m.size()) +
              " probes)";
    else if (!std::isfinite(max_over_steps(m, "probe_trainer/max_abs_dlogp")))
      first = "— (no probe in other numerics)";
    os << "| " << r.run->records.label << " | " << numerics_text(r.run->records.config) << " | "
       << sig(mean_over_steps(m, "rollout_corr/k3_kl")) << " | " << sig(mean_over_steps(m, "rollout_corr/full_tv"))
       << " | " << sig(max_over_steps(m, "mismatch/max_abs_dlogp")) << " | "
       << sig(mean_over_steps(m, "rollout_corr/is_ess"), 6) << " | " << sig(mean_over_steps(m, "probe_trainer/k3"))
       << " / " << sig(mean_over_steps(m, "probe_trainer/full_tv")) << " | " << first << " | "
       << sig(max_over_steps(m, "probe/max_abs_dlogp")) << " |\n";
  }
}

// Per run, a row per rollout-probability bucket.
void bucket_tables(std::ostringstream& os, const std::vector<RunSection>& with) {
  const auto at = [](const Json& row, size_t i) { return row[i].is_null() ? NAN : row[i].get<double>(); };
  for (const RunSection& r : with) {
    const Json& b = r.series["buckets"];
    if (with.size() > 1) os << "**" << r.run->records.label << "**\n\n";
    os << "| rollout probability of the token | k3 KL per token | mean \\|Δp\\| | share of the tokens | share of the "
          "k3 sum |\n| --- | ---: | ---: | ---: | ---: |\n";
    for (size_t i = 0; i < b["labels"].size(); ++i)
      os << "| " << b["labels"][i].get<std::string>() << " | " << sig(at(b["k3_kl"], i)) << " | "
         << sig(at(b["probs_diff_mean"], i)) << " | " << format_percent(at(b["token_share"], i), "—") << " | "
         << format_percent(at(b["k3_share"], i), "—") << " |\n";
    os << "\n";
  }
}

// Per run: the first stage past the threshold and every stage's max |Δ|.
void stage_lines(std::ostringstream& os, const std::vector<RunSection>& with) {
  for (const RunSection& r : with) {
    const Json& stages = r.series["stages"];
    os << "- **" << r.run->records.label << "**: ";
    if (!stages["first_stage"].is_null())
      os << "the two numerics first differ by more than " << sig(stages["threshold"].get<double>())
         << " (`probe.layer_threshold`) at `" << stages["first_stage"].get<std::string>() << "` ("
         << stages["first_stage_steps"].get<int64_t>() << " of " << r.run->records.metrics.size() << " probes)";
    else
      os << "no stage passed `probe.layer_threshold` (" << sig(stages["threshold"].get<double>()) << ")";
    os << "; max |Δ| of the residual stream after each stage, mean over the probes:";
    for (size_t i = 0; i < stages["names"].size(); ++i)
      os << (i ? ", " : " ") << stages["names"][i].get<std::string>() << " "
         << sig(stages["max_abs"][i].is_null() ? NAN : stages["max_abs"][i].get<double>());
    os << ".\n";
  }
}

}  // namespace

std::string mismatch_section_markdown(const std::vector<ReportRun>& runs) {
  std::vector<RunSection> with;
  for (const ReportRun& r : runs)
    if (run_has_mismatch(r.records))
      with.push_back({&r, mismatch_section_series(r.records, r.model.num_hidden_layers)});
  if (with.empty()) return "";
  std::ostringstream os;
  os << "\n## Mismatch: its size, where in the distribution, where it enters\n\n"
        "The engine and the trainer computed differently in "
     << (with.size() == runs.size() ? "these runs" : "the runs below")
     << " (other numerics on one side, or a batch-dependent engine): the trainer's recomputation of a sampled "
        "token's log-prob is not the engine's, so the PPO ratio of an on-policy token is not 1. Means over the "
        "steps; the probe batch is the task's first held-out prompts, scored after every sync.\n\n";
  size_table(os, with);
  os << "\nk3 KL is mean(ρ − 1 − log ρ) over the step's sampled tokens (ρ = p_trainer / p_rollout), the TV "
        "½ Σ|p − q| over the WHOLE next-token distributions at the positions of the step's first samples "
        "(`mismatch.full_vocab_samples`): mass moved between tokens that were never sampled shows only there. The "
        "**sync check** (`probe/*`) scores the probe batch with the trainer's weights in the engine's own "
        "numerics: it is 0 by design whatever the numerics, and says the weight sync landed — it is not the "
        "mismatch, which `probe_trainer/*` measures on the same batch.\n\n"
        "![k3 KL and TV over steps](plots/mismatch_steps.png)\n\n"
        "Solid: each step's own samples (`rollout_corr/k3_kl`, `rollout_corr/full_tv`); dashed: the probe batch "
        "(`probe_trainer/k3`, `probe_trainer/full_tv`).\n\n"
        "### By rollout probability\n\n";
  bucket_tables(os, with);
  os << "![mismatch by rollout probability](plots/mismatch_buckets.png)\n\n"
        "Left: k3 per token by the rollout's probability of the token. Right: each bucket's share of the run's "
        "tokens against its share of the k3 sum. The mismatch lives in the tokens the rollout found unlikely: "
        "their k3 per token is orders of magnitude above the confident ones', so they carry more of the k3 sum "
        "than of the tokens (docs/mismatch.md).\n\n"
        "### Where it enters\n\n";
  stage_lines(os, with);
  os << "\n![where the mismatch enters](plots/mismatch_stages.png)\n\n"
        "The probe batch through the training forward in each numerics, compared after every stage (the "
        "embedding, each layer's output, the final norm, the logits; model/forward_comparison.h): where the "
        "difference appears and how it grows toward the logits. Dotted: the threshold. A batch-dependent engine "
        "(`numerics.batch_invariant = false`) shows no stage: its difference is of the batch, not of a layer.\n";
  return os.str();
}

}  // namespace rlcpp
