// The run ledger: the back-of-the-envelope numbers of an LLM system next to what this run measured, one line
// each, so a reader learns both the rule and how far reality sits from it (docs/benchmarks.md "Limits").
//
//   parameters          N = V·C [+ V·C untied head] + L·(2C + C·(Hq+2·Hkv)·d + Hq·d·C + 3·C·F [+ biases]) + C
//   training memory     16 B/parameter (fp32 weights, gradients, AdamW m and v)  vs peak resident bytes
//   KV cache            2·L·Hkv·d·bytes per token                                vs the engine's own count
//   FLOPs per token     6N training (forward + backward), 2N inference (forward)
//   achieved FLOP/s     6N · trained tok/s and 2N · engine tok/s                 vs the measured matmul peak (MFU)
//   decode floor        weight bytes / memory bandwidth                          vs the measured engine step
//
// Pure functions of the model's shapes and the measured figures; every formula is written out here rather
// than taken from ModelConfig::num_parameters or the engine, so the measured column checks the formula column.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "model/model_config.h"

namespace rlcpp {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// The machine's yardsticks a run measured at its start (loop/start_ledger.h), read back by `rlcpp report`.
struct MachineFigures {
  int64_t matmul_size = 1024;  // M = N = K of the fp32 matmul timed
  double matmul_peak_flops = kNotMeasured;
  double bf16_matmul_peak_flops = kNotMeasured;  // the packed bf16 product at the same size (vdpbf16ps where it can)
  int64_t copy_bytes = int64_t{64} << 20;  // buffer copied
  double copy_bandwidth = kNotMeasured;    // bytes/s, read + write
};

// What a run measured; kNotMeasured where it did not (yet).
struct LedgerFigures {
  double parameters = kNotMeasured;               // counted in the parameter store
  double resident_bytes = kNotMeasured;           // peak resident memory of the trainer process (VmHWM)
  double engine_kv_bytes_per_token = kNotMeasured;  // the rollout engine's own figure
  double train_tokens_per_s = kNotMeasured;       // trained tokens (forward + backward) per second of update
  double engine_tokens_per_s = kNotMeasured;      // prefill + sampled tokens per second of the engine's rollout
  double matmul_peak_flops = kNotMeasured;        // kernels/machine_peaks.h
  double bf16_matmul_peak_flops = kNotMeasured;   // the yardstick of a role whose products are bf16
  double memory_bandwidth = kNotMeasured;         // bytes/s of a large copy (read + write)
  double engine_step_s = kNotMeasured;            // mean rollout engine step (prefill steps included)
};

// Bytes per element the rollout engine keeps: 4 in fp32; bf16/fp16 halve both; int8 and fp8 weights are one
// byte each (the rule counts every weight so; the embeddings and lm_head actually stay in the compute dtype).
// adapter_parameters: a LoRA run's trained adapter parameters (0: full fine-tuning), which change the training
// memory's rule, with lora_base the bytes of each of its frozen base's values (4 in fp32, 2 in bf16).
struct LedgerDtypes {
  int64_t kv_cache = 4;
  int64_t weights = 4;
  int64_t adapter_parameters = 0;
  int64_t lora_base = 4;
  // The roles whose products multiply bf16 operands: their MFU is against the bf16 product's peak, not sgemm's.
  bool trainer_bf16 = false;
  bool rollout_bf16 = false;
};

struct LedgerLine {
  std::string key;          // stable name: parameters, training_memory, kv_bytes_per_token, ...
  std::string quantity;     // in words
  std::string formula;      // the rule, then the numbers put in
  double formula_value = kNotMeasured;
  std::string unit;         // "", "B", "FLOP", "FLOP/s", "s"
  std::string measurement;  // what the measured column is ("" = the rule has no measurement of its own)
  double measured = kNotMeasured;
  std::string ratio_name;   // e.g. "measured/formula", "MFU"
  double ratio = kNotMeasured;
};

// One layer's attention parameters (q, k, v and o projections, with the family's biases and Qwen3's q/k norms)
// and their formula in the symbols above: "C·(Hq+2·Hkv)·d + Hq·d·C [+ (Hq+2·Hkv)·d] [+ C] [+ 2·d]".
std::pair<double, std::string> attention_parameters_per_layer(const ModelConfig& model);

// The ledger's lines, in the order of the header comment.
std::vector<LedgerLine> build_ledger(const ModelConfig& model, const LedgerFigures& figures,
                                     const LedgerDtypes& dtypes = {});
// The line with `key`; throws naming it when absent.
const LedgerLine& ledger_line(const std::vector<LedgerLine>& lines, const std::string& key);

// "V=32 C=128 L=4 Hq=4 Hkv=2 d=32 F=352, tied embeddings": the symbols of the formulas.
std::string ledger_symbols(const ModelConfig& model);
// Aligned text for the console (one line per entry, "—" where not measured).
std::string format_ledger_text(const ModelConfig& model, const std::vector<LedgerLine>& lines);
// A Markdown table for report.md.
std::string format_ledger_markdown(const ModelConfig& model, const std::vector<LedgerLine>& lines);
// Lines as JSON objects (null where not measured).
Json ledger_to_json(const std::vector<LedgerLine>& lines);

// 742528 -> "742,528"; 1.23e9 FLOP/s -> "1.23 GFLOP/s"; 2.5e-4 s -> "250 µs"; NaN -> "—".
std::string format_ledger_value(double value, const std::string& unit);

}  // namespace rlcpp
