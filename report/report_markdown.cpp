#include "report/report_markdown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/metrics.h"
#include "report/markdown_format.h"
#include "report/mismatch_section.h"
#include "report/run_report.h"

namespace rlcpp {

namespace {

std::string percent(double share) { return format_percent(share, "—"); }
std::string fixed(double v, int digits) { return format_fixed(v, digits, "—"); }

// config.json's value at a dotted path as text ("" when absent).
std::string config_text(const Json& config, const std::string& path) {
  const Json* j = &config;
  std::istringstream keys(path);
  for (std::string key; std::getline(keys, key, '.');) {
    if (!j->is_object() || !j->contains(key)) return "";
    j = &(*j)[key];
  }
  return j->is_string() ? j->get<std::string>() : j->dump();
}

std::string describe_run(const ReportRun& r) {
  const Json& c = r.records.config;
  if (!c.is_object()) return "no config.json";
  std::string model = config_text(c, "init_checkpoint");
  const bool warm = config_text(c, "warm_start.enabled") == "true";
  const std::string preset =
      std::string("`").append(config_text(c, warm ? "warm_start.sft.model_preset" : "model_preset")).append("`");
  if (!model.empty()) model = "`" + model + "`";
  else if (warm) model = preset + " after an SFT warm start";
  else model = "random " + preset;
  std::ostringstream os;
  os << "model " << model << ", " << config_text(c, "algorithm.name") << " on `" << config_text(c, "task.name")
     << "`, " << config_text(c, "rollout.prompts_per_step") << " prompts × " << config_text(c, "rollout.group_size")
     << " samples a step, placement " << config_text(c, "rollout.placement") << ", "
     << r.records.metrics.size() << " of " << config_text(c, "steps") << " steps recorded";
  return os.str();
}

// Mean of `key` over the first (or last) `n` steps that have it.
double mean_of_end(const std::vector<Json>& records, const std::string& key, size_t n, bool last) {
  double sum = 0;
  size_t count = 0;
  for (size_t i = 0; i < records.size() && count < n; ++i) {
    const double v = record_number(records[last ? records.size() - 1 - i : i], key);
    if (std::isfinite(v)) sum += v, ++count;
  }
  return count ? sum / static_cast<double>(count) : std::nan("");
}

void summary_table(std::ostringstream& os, const std::vector<ReportRun>& runs) {
  os << "| run | steps | wall time | s/step | held-out accuracy first → last (best) | mean reward, first 3 → last 3 "
        "steps | rollout: sampled tok/s | training: trained tok/s |\n";
  os << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const ReportRun& r : runs) {
    const std::vector<Json>& m = r.records.metrics;
    std::vector<double> acc;
    for (const Json& j : m)
      if (std::isfinite(record_number(j, "eval/accuracy"))) acc.push_back(record_number(j, "eval/accuracy"));
    std::string acc_text = "—";
    if (!acc.empty()) {
      double best = acc.front();
      for (double a : acc) best = std::max(best, a);
      acc_text = percent(acc.front()) + " → " + percent(acc.back()) + " (" + percent(best) + ")";
    }
    const double steps = static_cast<double>(m.size());
    const double rollout_s = sum_over_steps(m, "timing_s/rollout_draws");
    os << "| " << r.records.label << " | " << m.size() << " | "
       << format_duration(record_number(m.back(), "elapsed_s")) << " | "
       << fixed(sum_over_steps(m, "timing_s/step") / steps, 2) << " | " << acc_text << " | "
       << fixed(mean_of_end(m, "reward/mean", 3, false), 3) << " → " << fixed(mean_of_end(m, "reward/mean", 3, true), 3)
       << " | " << format_ledger_value(rollout_s > 0 ? sum_over_steps(m, "tokens/sampled") / rollout_s : NAN, "/s")
       << " | " << format_ledger_value(r.figures.train_tokens_per_s, "/s") << " |\n";
  }
}

void phase_table(std::ostringstream& os, const std::vector<ReportRun>& runs) {
  os << "| run |";
  for (const PhaseGroup& g : report_phase_groups()) os << " " << g.name << " |";
  os << "\n| --- |";
  for (size_t i = 0; i < report_phase_groups().size(); ++i) os << " ---: |";
  os << "\n";
  for (const ReportRun& r : runs) {
    const double step_s = sum_over_steps(r.records.metrics, "timing_s/step");
    os << "| " << r.records.label << " |";
    for (const PhaseGroup& g : report_phase_groups()) {
      double s = 0;
      for (const std::string& p : g.phases) s += sum_over_steps(r.records.metrics, "timing_s/" + p);
      os << " " << percent(step_s > 0 ? s / step_s : NAN) << " |";
    }
    os << "\n";
  }
}

void kv_reuse_table(std::ostringstream& os, const std::vector<ReportRun>& runs) {
  os << "| run | prompt tokens prefilled | not prefilled (K/V already there) | prefix-cache hit rate |\n"
        "| --- | ---: | ---: | ---: |\n";
  for (const ReportRun& r : runs) {
    const std::vector<Json>& m = r.records.metrics;
    const double queried = sum_over_steps(m, "rollout/prefix_cache_queried_tokens");
    const bool recorded = !m.empty() && std::isfinite(record_number(m.back(), "rollout/prefill_tokens_saved"));
    os << "| " << r.records.label << " | " << fixed(sum_over_steps(m, "rollout/prefill_tokens"), 0) << " | "
       << (recorded ? fixed(sum_over_steps(m, "rollout/prefill_tokens_saved"), 0) : "—") << " | "
       << percent(queried > 0 ? sum_over_steps(m, "rollout/prefix_cache_hit_tokens") / queried : NAN) << " |\n";
  }
}

void mismatch_table(std::ostringstream& os, const std::vector<ReportRun>& runs) {
  os << "| run | max \\|Δlogp\\| (largest over the run) | mean \\|Δp\\| (last step) | k3 (last step) | sync check: "
        "probe max \\|Δlogp\\| (largest; 0 by design) |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (const ReportRun& r : runs) {
    double worst = NAN, probe_worst = NAN;
    for (const Json& j : r.records.metrics) {
      const double v = record_number(j, "mismatch/max_abs_dlogp"), p = record_number(j, "probe/max_abs_dlogp");
      if (std::isfinite(v) && !(v <= worst)) worst = v;
      if (std::isfinite(p) && !(p <= probe_worst)) probe_worst = p;
    }
    const Json& last = r.records.metrics.back();
    char buf[256];
    auto g = [](double v) {
      if (!std::isfinite(v)) return std::string("—");
      char b[32];
      std::snprintf(b, sizeof b, "%.3g", v);
      return std::string(b);
    };
    std::snprintf(buf, sizeof buf, "| %s | %s | %s | %s | %s |\n", r.records.label.c_str(), g(worst).c_str(),
                  g(record_number(last, "mismatch/mean_abs_dp")).c_str(), g(record_number(last, "mismatch/k3")).c_str(),
                  g(probe_worst).c_str());
    os << buf;
  }
}

}  // namespace

std::string report_markdown(const std::vector<ReportRun>& runs) {
  std::ostringstream os;
  os << "# rlcpp run report: ";
  for (size_t i = 0; i < runs.size(); ++i) os << (i ? " vs " : "") << runs[i].records.label;
  os << "\n\nWritten by `rlcpp report` from each run directory's `metrics.jsonl` (one record per step), "
        "`samples.jsonl`, `config.json` and `ledger.json`. The plots are in `plots/`; the numbers behind them in "
        "`plots/plot_data.json`.\n\n";
  for (const ReportRun& r : runs)
    os << "- **" << r.records.label << "** (`" << r.records.dir << "`): " << describe_run(r) << ".\n";

  os << "\n## Summary\n\n";
  summary_table(os, runs);
  os << "\nSampled tok/s: the response tokens the engine sampled (`tokens/sampled`) over its wall time for them "
        "(`timing_s/rollout_draws`). Trained tok/s: the tokens that went through the policy's forward + backward "
        "(`tokens/trained`: the groups dynamic sampling kept, prompt + response, every PPO epoch) over the "
        "update_actor phase. The ledger's MFU is 6N times the trained tok/s over the matmul peak this run "
        "measured (at its start and after its last step: the larger).\n";

  os << "\n## Reward and held-out accuracy\n\n![mean reward](plots/reward.png)\n\n"
        "Mean reward of each step's rollout batch (training prompts, sampled), against the step and against "
        "the wall time since the run started (what a step costs shows in the second).\n\n"
        "![held-out accuracy](plots/accuracy.png)\n\n"
        "Greedy exact-match accuracy on held-out problems, measured every `eval_every` steps and at the end.\n\n"
        "![agent episodes](plots/agent.png)\n\n"
        "An agent run's episodes (`agent.env`, agent/README.md): assistant turns (solid) and tool calls (dashed) per "
        "episode of each step's rollout batch; a note for a single-turn run.\n";

  os << "\n## Where a step's time goes\n\n";
  phase_table(os, runs);
  os << "\n![phase shares](plots/phase_shares.png)\n\n"
        "Each bar is one step's wall time split into its phases (shares add up to 1): **rollout** (the engine "
        "generates the batch), **reward** (scoring), **logprobs** (old and reference log-probs, values, and with "
        "mixed numerics the full-vocabulary mismatch forward), "
        "**update** (advantages and the optimizer steps), **sync** (weight publish and the consistency probe), "
        "**eval + checkpoint** (only on those steps), **other** (the rest of the step: bookkeeping). The table "
        "gives each group's share of the whole run.\n";

  os << "\n## Throughput\n\n![throughput](plots/throughput.png)\n\n"
        "Rollout: sampled tokens/s (the response tokens the engine sampled over its time for them). Training: "
        "trained tokens/s (the tokens through the policy's forward + backward, after dynamic sampling, over the "
        "update_actor phase), per step. The ledger below turns them into FLOP/s and MFU.\n";

  os << "\n## KV reuse\n\n";
  kv_reuse_table(os, runs);
  os << "\nPrompt tokens the engine ran through the model, and those it did not because their K/V was already in "
        "its cache: a group's samples share one prefill, and the prefix cache (`rollout.prefix_cache`) finds full "
        "blocks of a prompt prefix computed before under the same weights (each group's prompt looked up once; the "
        "hit rate is the share found). Every weight sync empties the cache, so in a run hits come from prompts of "
        "one step sharing a prefix (a chat template's system prompt, few-shot headers).\n";

  os << "\n## Rollout vs trainer mismatch\n\n";
  mismatch_table(os, runs);
  os << "\n![mismatch](plots/mismatch.png)\n\n"
        "How far the engine's log-probs of the sampled tokens sit from the trainer's (old_logprob) for the same "
        "weights: max |Δlogp|, mean |Δp| and the k3 KL estimate, per step. 0 means bit-identical: the engine and "
        "the trainer compute in the same numerics with batch-invariant kernels (numerics.batch_invariant, the "
        "default); with batch_invariant false float rounding gives ~1e-7..1e-5 in fp32, and other numerics on "
        "either side (rollout.dtype, rollout.quantization, trainer.dtype) give more. Dashed: the **sync check** "
        "after each weight sync (`probe/*`: the engine against the trainer's forward in the engine's own "
        "numerics), 0 by design whatever the numerics — not the mismatch; a jump there means the engine samples "
        "with other weights.\n";

  os << mismatch_section_markdown(runs);

  os << "\n## Response lengths\n\n![response lengths](plots/response_length.png)\n\n"
        "Left: mean response length per step (tokens, EOS included) with the min–max range and the 90th "
        "percentile over the whole batch. Right: lengths of the responses kept in `samples.jsonl`, the first "
        "half of the run against the second.\n";

  os << "\n## Memory\n\n![memory](plots/memory.png)\n\n"
        "Resident memory of the trainer process after each step (dotted: its peak so far), against the 16 bytes/parameter rule (fp32 "
        "weights, gradients and AdamW's two moments). A split run's rollout worker is a separate process and "
        "not counted here.\n";

  os << "\n## Ledger\n\nEach line puts a rule of thumb of LLM systems next to what this run measured.\n";
  for (const ReportRun& r : runs) {
    if (runs.size() > 1) os << "\n### " << r.records.label << "\n";
    os << "\n" << format_ledger_markdown(r.model, r.ledger);
    if (r.machine_measured_at_report)
      os << "\nThe run has no machine figures in `ledger.json`: the matmul peak and the bandwidth were measured "
            "now, on the machine that wrote this report.\n";
  }
  os << "\nHow to read it:\n\n"
        "- **Training memory**: fp32 AdamW keeps 4 bytes each of weight, gradient and the two moments per "
        "parameter. Resident memory adds activations, the KV cache (colocated rollout), the program and its "
        "libraries; for a model of a million parameters that fixed cost dominates (ratio ≫ 1), for W2 (494M "
        "parameters, 7.9 GB by the rule) the rule does.\n"
        "- **KV cache**: every token keeps a K and a V vector per layer and KV head; the engine's figure is "
        "its cache's bytes over its slots.\n"
        "- **FLOPs and MFU**: a forward pass costs ~2 FLOPs per parameter per token (one multiply-add), "
        "backward twice that, so training ~6N and inference ~2N (attention's own FLOPs left out). MFU is the "
        "achieved FLOP/s over the matmul peak measured on this machine (an fp32 1024³ matrix product, the fastest "
        "of 5 calls, at the run's start and after its last step: the larger). Training counts the trained "
        "tokens (after dynamic sampling, every epoch); the reference forward DPO runs inside its update is not "
        "counted, so its MFU is a lower bound.\n"
        "- **Decode floor**: a decode step reads every weight at least once, so it cannot run faster than "
        "weight bytes over memory bandwidth (measured by a large copy, read + write counted). Small models "
        "fit in the CPU's caches and large batches make a step compute-bound, so measured/floor ≫ 1 says "
        "which wall a step is against; the engine step is the mean over all engine steps (prefill included).\n";
  return os.str();
}

}  // namespace rlcpp
