// Non-finite weights are stopped where they enter or leave: a checkpoint load, a weight sync the rollout side
// receives, the engine's install of a new version, the update that produced them and a checkpoint save. A NaN
// or infinity that got through would surface much later as "non-finite logits" in a sampler, or as a run that
// trains on and saves garbage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/parameters.h"

namespace rlcpp {

// Index of the first NaN or infinity among x[0, n), or -1 when all are finite. CPU memory.
int64_t first_non_finite(const float* x, int64_t n);

struct NonFiniteWeight {
  std::string tensor;
  int64_t index = 0;  // element of the tensor, row-major
  float value = 0;    // nan, inf or -inf
  // "tensor 'model.norm.weight' holds nan at element 3"
  std::string describe() const;
};

// The first parameter of `layout` (in layout order) whose floats in `data` hold a NaN or an infinity, or nullopt.
std::optional<NonFiniteWeight> find_non_finite(const std::vector<ParameterInfo>& layout, const float* data);

// The first non-finite parameter of `params`, which may live on ctx's device (a weight sync's copy on a GPU): one
// parallel pass there answers for the common, finite case; only when it finds something are the weights read on
// the host to name the tensor.
std::optional<NonFiniteWeight> find_non_finite(const ExecContext& ctx, const ParameterStore& params);

// Throws "WHAT: tensor 'NAME' holds nan at element I" when a parameter is not finite (a store of fp32 or bf16 on the
// host).
void check_finite_weights(const ParameterStore& params, const std::string& what);

}  // namespace rlcpp
