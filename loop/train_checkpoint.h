// A resumable train checkpoint, RUN_DIR/checkpoints/step_N/:
//   config.json + model.safetensors   the policy (Hugging Face layout, model/checkpoint.h)
//   trainer_state.safetensors         AdamW exp_avg and exp_avg_sq (flat, parameter layout order)
//   state.json                        step, policy version, optimizer step count, RNG stream positions
// Everything is written into step_N.partial and renamed to step_N last, so a crash leaves no step_N that
// resuming could mistake for complete.
#pragma once

#include <cstdint>
#include <string>

#include "core/philox.h"
#include "model/adamw.h"
#include "model/parameters.h"

namespace rlcpp {

struct TrainState {
  int64_t step = 0;            // steps completed
  int64_t policy_version = 0;  // version the policy holds after `step`
  PhiloxStream* data_rng = nullptr;
  PhiloxStream* update_rng = nullptr;
};

void save_train_checkpoint(const std::string& dir, const ParameterStore& params, AdamW& optimizer,
                           const TrainState& state);

// Loads the policy into `params` (same layout), the optimizer moments and step count into `optimizer`, the
// RNG positions into state's streams; returns step and version in `state`. Errors name the file.
void load_train_checkpoint(const std::string& dir, ParameterStore& params, AdamW& optimizer, TrainState& state);

}  // namespace rlcpp
