// A rollout batch as the update sees it: whole sampled sequences, each with per-response-token arrays, packed
// into model micro-batches on demand.
//
// Layout: sample i is prompt (P tokens, BOS first) + response (R tokens, EOS included when sampled). Packed,
// it occupies positions [cu[i], cu[i+1]) of the micro-batch, and response token j is the target of position
// cu[i] + P - 1 + j. Every per-token array of trainer/ (logp, advantages, values, ...) uses that position
// layout (loss_offsets / target_mask of loss_layout.h): entries of positions without a response target are 0
// with mask 0. Values follow the same alignment (model/transformer.h): values at position cu[i] + P - 1 + j
// estimate the return from response token j on.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/logprob_scoring.h"
#include "model/packed_batch.h"
#include "model/transformer.h"

namespace rlcpp {

struct RolloutSample {
  std::vector<int32_t> prompt;    // P >= 1 token ids
  std::vector<int32_t> response;  // R token ids
  // Per response token (R entries each); empty when unused.
  std::vector<float> mask;          // weight of each token in the losses; empty = all 1 (0 e.g. for tool output)
  std::vector<float> old_logp;      // actor: logp under the policy the update starts from
  std::vector<float> advantages;    // actor
  std::vector<float> ref_logp;      // actor: frozen reference, for a KL in the loss (and the kl_loss metric)
  std::vector<float> rollout_logp;  // actor: as the rollout engine sampled it, for truncated IS
  // Per response token, when a sample spans policy versions (an episode): the version that sampled each token
  // (-1 for tokens the model did not sample), whose log-prob rollout_logp holds; empty otherwise.
  std::vector<int64_t> versions;
  std::vector<float> old_values;    // critic: predictions the update starts from
  std::vector<float> returns;       // critic: GAE returns
  // The temperature and truncation rollout_logp is of, as the engine drew the sample: the trainer's old and
  // reference log-probs and the update score the sample at the same.
  LogprobScoring scoring;
};

using RolloutField = std::vector<float> RolloutSample::*;

// The scoring every sample shares (a micro-batch's forward runs at one temperature and truncation); `fallback`
// for no samples. Throws naming the first sample that differs from sample 0 and both scorings.
LogprobScoring common_logprob_scoring(const std::vector<RolloutSample>& samples, const LogprobScoring& fallback);

// Some samples of a rollout batch packed into one model micro-batch.
struct PackedRollout {
  PackedBatch batch;
  std::vector<size_t> samples;  // index into the rollout batch of each packed sequence
  std::vector<int64_t> cu;      // (B+1) loss offsets: the batch's cu_seqlens
  std::vector<float> mask;      // (N) the samples' masks at their response positions, 0 elsewhere
  std::vector<int64_t> response_begin;  // position of response token 0 of each packed sequence
  std::vector<int64_t> response_size;   // R of each packed sequence

  // (N) the samples' `field` at their response positions, 0 elsewhere. Throws naming the sample and `name`
  // when a sample's array does not have one entry per response token.
  std::vector<float> scatter(const std::vector<RolloutSample>& all, RolloutField field, const char* name) const;
  // The inverse: per-position `values` (N) back to one array of R entries per packed sample.
  std::vector<std::vector<float>> gather(std::span<const float> values) const;
};

// Packs samples all[indices[k]] in that order. Errors name the sample (empty prompt, mask of the wrong length).
PackedRollout pack_rollout(const std::vector<RolloutSample>& all, std::span<const size_t> indices);

// Consecutive micro-batches of at most micro_batch_size samples over `indices`.
std::vector<PackedRollout> pack_micro_batches(const std::vector<RolloutSample>& all, std::span<const size_t> indices,
                                              int64_t micro_batch_size);

// Per response token of every sample, forward only, micro_batch_size samples at a time: logp at `temperature`
// (a policy: old_logp before the update, ref_logp with the reference's weights), or values (a value-head model).
// `truncation` (logprob_space "sampled"): the top-k / top-p the rollout sampled with, replayed (kernels/truncation.h).
// The forwards run on `exec`; `adapters`: LoRA adapters run unmerged beside `params` (host contexts).
std::vector<std::vector<float>> compute_response_logp(const ExecContext& exec, const Transformer& model,
                                                      const ParameterStore& params,
                                                      const std::vector<RolloutSample>& samples,
                                                      int64_t micro_batch_size, float temperature,
                                                      const Truncation& truncation = {},
                                                      const LinearAdapters* adapters = nullptr);
std::vector<std::vector<float>> compute_response_values(const ExecContext& exec, const Transformer& critic,
                                                        const ParameterStore& params,
                                                        const std::vector<RolloutSample>& samples,
                                                        int64_t micro_batch_size);

}  // namespace rlcpp
