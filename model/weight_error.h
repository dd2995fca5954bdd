// How far the weights a role computes with are from the fp32 master weights: the rounding (bf16, fp16) or the
// dequantisation error (int8, fp8_e4m3) of every matrix the model packs, as a weight sync reports it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/transformer.h"

namespace rlcpp {

struct WeightError {
  double max_abs = 0;  // max |w_prepared - w| over the matrices
  double rel_rms = 0;  // sqrt(sum (w_prepared - w)^2 / sum w^2)
  int64_t weights = 0;

  // PREFIX max_abs_err, PREFIX rel_rms_err.
  std::map<std::string, double> metrics(const std::string& prefix) const;
};

// The error of the Linear layers' weights in model.numerics().linear_weights and of lm_head in the compute
// dtype, against `params` (each matrix packed as the engine packs it, then read back), `rows_per_block` rows
// (a multiple of 16: whole panels) at a time.
WeightError prepared_weight_error(const Transformer& model, const ParameterStore& params,
                                  int64_t rows_per_block = 4096);

}  // namespace rlcpp
