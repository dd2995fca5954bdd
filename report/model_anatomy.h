// A model's anatomy from its shapes alone, no weights (`rlcpp ledger MODEL`): where the parameters are
// (embedding, attention, MLP, norms, lm_head), what one token's K and V cost under its grouped-query attention
// against full multi-head attention, what training holds per parameter, the FLOPs of a token, and, given this
// machine's measured matmul peak and read bandwidth, the floor of a decode step (each weight read once for few
// tokens: bandwidth-bound) against that of a prefill (many tokens per weight read: compute-bound).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "report/ledger.h"

namespace rlcpp {

struct ParameterPart {
  std::string name;     // "embedding", "attention", "MLP", "norms", "lm_head" (untied) or "value head"
  std::string formula;  // in the ledger's symbols (report/ledger.h: V C L Hq Hkv d F)
  double count = 0;
};

// The parts in the order above; they sum to ModelConfig::num_parameters().
std::vector<ParameterPart> parameter_parts(const ModelConfig& model);

struct AnatomyOptions {
  std::string dtype = "fp32";  // of the weights and the KV cache: fp32, bf16, fp16 (2 bytes) or int8 (1 byte)
  // This machine's yardsticks (kernels/machine_peaks.h, measured by the caller); NaN leaves the floors out.
  double matmul_peak_flops = kNotMeasured;
  double read_bandwidth = kNotMeasured;  // bytes/s of reading a large buffer once
  int64_t prefill_tokens = 512;       // the prefill whose floor is set against a decode step's
  int64_t lora_rank = 0;  // > 0: also LoRA's trained parameters and memory at this rank on every Linear layer
};

// Bytes per element of `dtype`; throws naming the value when it is not one of AnatomyOptions::dtype's.
int64_t anatomy_dtype_bytes(const std::string& dtype);

// The text `rlcpp ledger` prints.
std::string format_model_anatomy(const ModelConfig& model, const std::string& name, const AnatomyOptions& options);

}  // namespace rlcpp
