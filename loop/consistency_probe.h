// The consistency probe after each weight sync: a fixed batch (the task's first held-out prompts, one sample
// each, temperature 1, fixed seed) through the rollout engine (cached decode path) and the trainer's training
// forward on the same tokens, in the rollout's numerics (a Transformer with the engine's dtype and
// quantisation): the run stops when max |Δlogp| passes the bound, i.e. the engine does not sample with the
// weights the trainer holds (a sync that did not land, a broken swap, diverged kernels). With a batch-invariant
// engine the two are the same computation and the difference is exactly 0, whatever the dtype.
//
// When the trainer computes in other numerics (trainer.dtype != rollout.dtype, a quantised rollout), the same
// batch is also scored in the trainer's: that is the mismatch the run trains with, measured on fixed prompts.
#pragma once

#include <cstdint>
#include <optional>

#include "loop/consistency_probe_config.h"
#include "loop/mismatch.h"
#include "loop/rollout_backend.h"
#include "model/forward_comparison.h"
#include "tokenizer/tokenizer.h"
#include "reward/task.h"

namespace rlcpp {


struct ProbeResult {
  Mismatch engine;                  // engine vs the trainer's forward in the rollout numerics (probe/*)
  std::optional<Mismatch> trainer;  // engine vs the trainer's own numerics, when they differ (probe_trainer/*)
  // When they differ: where the two numerics part ways on the probe batch, stage by stage, and their whole
  // next-token distributions (model/forward_comparison.h; probe_trainer/full_kl, .../first_stage, ...).
  std::optional<ForwardComparison> where;
};

// Generates the probe batch with `rollout` (which must be at `version`), scores it with `rollout_model` (the
// trainer's weights in the rollout's numerics) and, when given and different, `trainer_model`; throws past the
// bound (probe.max_abs_dlogp, or max_abs_dlogp_blas for an engine that is not batch-invariant or whose device,
// `engine_device`, is another kind than `exec`'s, whose other ops sum in other orders) naming the figures. The
// scoring forwards run on `exec`. `unmerged` (an engine running LoRA adapters unmerged): the rollout-numerics
// scoring runs the base with a snapshot of the adapters unmerged, as the engine does; `trainer_model` scores
// `params` (the merged model) as ever.
ProbeResult run_consistency_probe(const ExecContext& exec, RolloutBackend& rollout, const Transformer& rollout_model,
                                  const ParameterStore& params, const Task& task, const Tokenizer& tokenizer,
                                  int64_t max_new_tokens, const ProbeConfig& config, int64_t version,
                                  const Transformer* trainer_model, Device engine_device,
                                  UnmergedRollout unmerged = {});

}  // namespace rlcpp
