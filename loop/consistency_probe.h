// The consistency probe after each weight sync: a fixed batch (the task's first held-out prompts, one sample
// each, temperature 1, fixed seed) through the rollout engine (cached decode path) and the trainer's training
// forward on the same tokens; the run stops when max |Δlogp| passes the bound, i.e. the engine does not
// sample with the weights the trainer holds (a sync that did not land, a broken swap, diverged numerics).
#pragma once

#include <cstdint>

#include "loop/consistency_probe_config.h"
#include "loop/mismatch.h"
#include "loop/rollout_backend.h"
#include "model/tokenizer.h"
#include "reward/task.h"

namespace rlcpp {


// Generates the probe batch with `rollout` (which must be at `version`), scores it with the trainer and
// returns the mismatch; throws past the bound naming the figures.
Mismatch run_consistency_probe(RolloutBackend& rollout, const Transformer& model, const ParameterStore& params,
                               const Task& task, const CharTokenizer& tokenizer, int64_t max_new_tokens,
                               const ProbeConfig& config, int64_t version);

}  // namespace rlcpp
