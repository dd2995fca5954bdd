#include "report/run_ledger.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "model/checkpoint.h"

namespace rlcpp {

namespace fs = std::filesystem;

namespace {

Json number_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

double json_number(const Json& j, const char* key) {
  if (!j.is_object()) return kNotMeasured;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNotMeasured;
}

// Sum of `key` over the records that hold every one of `keys` (so numerator and denominator cover the same
// steps).
double sum_where_all(const std::vector<Json>& records, const std::string& key, const std::vector<std::string>& keys) {
  double total = 0;
  bool any = false;
  for (const Json& r : records) {
    bool all = true;
    for (const std::string& k : keys) all = all && std::isfinite(record_number(r, k));
    if (!all) continue;
    total += record_number(r, key);
    any = true;
  }
  return any ? total : kNotMeasured;
}

double ratio(double a, double b) { return std::isfinite(a) && std::isfinite(b) && b > 0 ? a / b : kNotMeasured; }

}  // namespace

void write_start_ledger(const std::string& run_dir, const ParameterStore& params, int64_t peak_rss_bytes,
                        const MachineFigures& machine, const LedgerDtypes& dtypes) {
  LedgerFigures figures;
  figures.parameters = static_cast<double>(params.numel());
  if (peak_rss_bytes >= 0) figures.resident_bytes = static_cast<double>(peak_rss_bytes);
  figures.matmul_peak_flops = machine.matmul_peak_flops;
  figures.bf16_matmul_peak_flops = machine.bf16_matmul_peak_flops;
  figures.memory_bandwidth = machine.copy_bandwidth;
  const std::vector<LedgerLine> lines = build_ledger(params.config(), figures, dtypes);
  std::printf("%s  (— : measured as the run goes; `rlcpp report %s` fills them in)\n",
              format_ledger_text(params.config(), lines).c_str(), run_dir.c_str());
  std::fflush(stdout);
  const Json ledger = {{"model", model_config_to_hf_json(params.config())},
                       {"parameters_counted", params.numel()},
                       {"machine",
                        {{"matmul_size", machine.matmul_size},
                         {"matmul_peak_flops", number_or_null(machine.matmul_peak_flops)},
                         {"bf16_matmul_peak_flops", number_or_null(machine.bf16_matmul_peak_flops)},
                         {"copy_bytes", machine.copy_bytes},
                         {"copy_bandwidth_bytes_per_s", number_or_null(machine.copy_bandwidth)}}},
                       {"rollout_bytes", {{"kv_cache", dtypes.kv_cache}, {"weights", dtypes.weights}}},
                       {"lora_adapter_parameters", dtypes.adapter_parameters},
                       {"bf16_products", {{"trainer", dtypes.trainer_bf16}, {"rollout", dtypes.rollout_bf16}}},
                       {"lines", ledger_to_json(lines)}};
  write_json_file_atomic((fs::path(run_dir) / "ledger.json").string(), ledger);
}

void record_end_of_run_peak(const std::string& run_dir, double matmul_peak_flops, double bf16_matmul_peak_flops) {
  const std::string path = (fs::path(run_dir) / "ledger.json").string();
  Json ledger = load_json_file(path);
  Json& machine = ledger["machine"];
  RLCPP_CHECK(machine.is_object(), path << ": no \"machine\" object to add the end-of-run peak to");
  // `key`_start and `key`_end kept, `key` the larger.
  auto record = [&](const std::string& key, double end) {
    const double start = json_number(machine, (key + "_start").c_str());
    const double first = std::isfinite(start) ? start : json_number(machine, key.c_str());
    machine[key + "_start"] = number_or_null(first);
    machine[key + "_end"] = number_or_null(end);
    double peak = first;
    if (std::isfinite(end) && !(end <= peak)) peak = end;  // NaN start
    machine[key] = number_or_null(peak);
  };
  record("matmul_peak_flops", matmul_peak_flops);
  record("bf16_matmul_peak_flops", bf16_matmul_peak_flops);
  write_json_file_atomic(path, ledger);
}

ModelConfig run_model_config(const RunRecords& run) {
  if (run.ledger.is_object() && run.ledger.contains("model"))
    return model_config_from_hf_json(run.ledger["model"], run.dir + "/ledger.json: model");
  const fs::path checkpoints = fs::path(run.dir) / "checkpoints";
  if (fs::is_directory(checkpoints)) {
    const std::string newest = latest_step_checkpoint(run.dir + "/checkpoints");
    if (!newest.empty()) {
      const std::string path = newest + "/config.json";
      return model_config_from_hf_json(load_json_file(path), path);
    }
  }
  RLCPP_FAIL("report: " << run.dir << " has neither ledger.json nor a checkpoint with config.json, so the "
                        "model's shapes are unknown");
}

LedgerDtypes run_ledger_dtypes(const RunRecords& run) {
  LedgerDtypes d;
  if (!run.ledger.is_object() || !run.ledger.contains("rollout_bytes")) return d;
  const Json& j = run.ledger["rollout_bytes"];
  if (std::isfinite(json_number(j, "kv_cache"))) d.kv_cache = j["kv_cache"].get<int64_t>();
  if (std::isfinite(json_number(j, "weights"))) d.weights = j["weights"].get<int64_t>();
  if (std::isfinite(json_number(run.ledger, "lora_adapter_parameters")))
    d.adapter_parameters = run.ledger["lora_adapter_parameters"].get<int64_t>();
  if (run.ledger.contains("bf16_products") && run.ledger["bf16_products"].is_object()) {
    const Json& b = run.ledger["bf16_products"];
    d.trainer_bf16 = b.value("trainer", false);
    d.rollout_bf16 = b.value("rollout", false);
  }
  return d;
}

MachineFigures run_machine_figures(const RunRecords& run) {
  MachineFigures m;
  m.matmul_peak_flops = kNotMeasured;
  m.copy_bandwidth = kNotMeasured;
  if (!run.ledger.is_object() || !run.ledger.contains("machine")) return m;
  const Json& j = run.ledger["machine"];
  m.matmul_peak_flops = json_number(j, "matmul_peak_flops");
  m.bf16_matmul_peak_flops = json_number(j, "bf16_matmul_peak_flops");
  m.copy_bandwidth = json_number(j, "copy_bandwidth_bytes_per_s");
  if (std::isfinite(json_number(j, "matmul_size"))) m.matmul_size = j["matmul_size"].get<int64_t>();
  if (std::isfinite(json_number(j, "copy_bytes"))) m.copy_bytes = j["copy_bytes"].get<int64_t>();
  return m;
}

LedgerFigures run_ledger_figures(const RunRecords& run, const MachineFigures& machine) {
  LedgerFigures f;
  f.parameters = json_number(run.ledger, "parameters_counted");
  const MachineFigures own = run_machine_figures(run);
  f.matmul_peak_flops = std::isfinite(own.matmul_peak_flops) ? own.matmul_peak_flops : machine.matmul_peak_flops;
  f.bf16_matmul_peak_flops =
      std::isfinite(own.bf16_matmul_peak_flops) ? own.bf16_matmul_peak_flops : machine.bf16_matmul_peak_flops;
  f.memory_bandwidth = std::isfinite(own.copy_bandwidth) ? own.copy_bandwidth : machine.copy_bandwidth;

  for (const Json& r : run.metrics) {
    for (const char* key : {"memory/peak_rss_bytes", "memory/rss_bytes"}) {
      const double v = record_number(r, key);
      if (std::isfinite(v) && !(v <= f.resident_bytes)) f.resident_bytes = v;  // NaN start: take the first
    }
    const double kv = record_number(r, "rollout/kv_bytes_per_token");
    if (std::isfinite(kv)) f.engine_kv_bytes_per_token = kv;
  }

  // Trained tokens (through the policy's forward + backward: after dynamic sampling, every epoch) over the
  // update phase; sampled + prefilled tokens over the engine's own seconds for them (the rollout's wall time,
  // in the step or ahead of it under async, not the trainer's wait for it).
  const std::vector<std::string> train_keys = {"tokens/trained", "timing_s/update_actor"};
  f.train_tokens_per_s = ratio(sum_where_all(run.metrics, "tokens/trained", train_keys),
                               sum_where_all(run.metrics, "timing_s/update_actor", train_keys));
  const std::vector<std::string> engine_keys = {"rollout/prefill_tokens", "rollout/generated_tokens",
                                                "timing_s/rollout_draws"};
  f.engine_tokens_per_s = ratio(sum_where_all(run.metrics, "rollout/prefill_tokens", engine_keys) +
                                    sum_where_all(run.metrics, "rollout/generated_tokens", engine_keys),
                                sum_where_all(run.metrics, "timing_s/rollout_draws", engine_keys));
  const std::vector<std::string> step_keys = {"engine/forward_s", "engine/steps"};
  f.engine_step_s = ratio(sum_where_all(run.metrics, "engine/forward_s", step_keys),
                          sum_where_all(run.metrics, "engine/steps", step_keys));
  return f;
}

}  // namespace rlcpp
