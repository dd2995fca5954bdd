// What `rlcpp train` does differently as one of N data-parallel ranks (`mpirun -np N rlcpp train CONFIG`,
// trainer/communicator.h). Rank 0 is the lead: it owns the rollout (its backend, workers and pipeline), the
// weight sync and probe, evaluation and the run directory (metrics, samples, checkpoints). Every rank runs the
// same learn step on the same draws — the lead's, broadcast — with the forward-only log-prob passes split over
// the ranks and the update's micro-batches sharded, gradients all-reduced (trainer/update_step.h), so the ranks
// hold the same weights after every step; a check compares their checksums each step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "loop/rollout_backend.h"
#include "loop/step_draws.h"
#include "model/parameters.h"
#include "model/transformer.h"
#include "trainer/communicator.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

// The lead's draws on every rank (broadcast as step_draws_to_json).
void share_draws(Communicator& comm, StepDraws& drawn);

// Stops the run naming the ranks whose weights differ from rank 0's after `step` (XXH3 of the flat buffer); step 0:
// the initial weights, before any work.
void check_ranks_agree(Communicator& comm, const ParameterStore& params, int64_t step);

// Stops the run on every rank when a rank's resolved run config is not rank 0's, naming the rank and the first key
// that differs (the configs are gathered whole: a few kB each). Mixed configs hang (another step count) or train
// on mixed gradients (another algorithm or dtype).
void check_ranks_share_config(Communicator& comm, const Json& resolved_config);

// compute_response_logp (trainer/rollout_batch.h) with the samples split over the ranks in contiguous shards and
// the results gathered: every rank gets every sample's log-probs, the same bits as one rank computing them all
// (each sample's log-probs depend on its own tokens only).
std::vector<std::vector<float>> response_logp_over_ranks(const ExecContext& exec, Communicator& comm,
                                                         const Transformer& model, const ParameterStore& params,
                                                         const std::vector<RolloutSample>& samples,
                                                         int64_t micro_batch_size, float temperature,
                                                         const Truncation& truncation);

// The backend of a rank other than the lead, which never generates: every call is an error naming the rank.
std::unique_ptr<RolloutBackend> make_absent_rollout(int rank);

}  // namespace rlcpp
