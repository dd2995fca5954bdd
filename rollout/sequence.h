// One sample being generated: its tokens, its block table, and its place in the state machine
//   waiting --admit--> running --finish--> finished
//                      running --preempt--> preempted --admit (recompute)--> running
// A preempted sequence has given back its blocks; on re-admission it prefills prompt + response so far.
#pragma once

#include <cstdint>
#include <vector>

#include "rollout/request.h"

namespace rlcpp {

enum class SequenceStatus { kWaiting, kRunning, kPreempted, kFinished };
const char* sequence_status_name(SequenceStatus status);

class Sequence {
 public:
  // `prompt` must outlive the sequence (it is the request's).
  Sequence(int64_t id, int64_t prompt_index, uint64_t prompt_id, int64_t sample_index,
           const std::vector<int32_t>& prompt);

  int64_t id() const { return id_; }  // index of its Sample in the result (prompt-major)
  int64_t prompt_index() const { return prompt_index_; }
  uint64_t prompt_id() const { return prompt_id_; }
  int64_t sample_index() const { return sample_index_; }

  SequenceStatus status() const { return status_; }
  void admit();                        // waiting | preempted -> running
  void preempt();                      // running -> preempted (blocks already released)
  void finish(FinishReason reason);    // running -> finished
  FinishReason finish_reason() const { return finish_reason_; }
  int64_t num_preemptions() const { return num_preemptions_; }

  int64_t prompt_len() const { return static_cast<int64_t>(prompt_->size()); }
  int64_t num_output() const { return static_cast<int64_t>(output_.size()); }
  int64_t num_tokens() const { return prompt_len() + num_output(); }
  int32_t token_at(int64_t position) const {
    return position < prompt_len() ? (*prompt_)[position] : output_[position - prompt_len()];
  }
  int32_t last_token() const { return token_at(num_tokens() - 1); }
  const std::vector<int32_t>& output() const { return output_; }
  const std::vector<float>& logprobs() const { return logprobs_; }
  void append(int32_t token, float logprob) {
    output_.push_back(token);
    logprobs_.push_back(logprob);
  }

  // How its tokens are drawn and when it stops (the request's; must outlive the sequence). The engine's
  // generate sets it; a caller driving Engine::step sets it per sequence.
  const SamplingParams* sampling = nullptr;
  // Alternatives reported with each sampled token (SampledRow::top): the most likely this many, 0 = none.
  int32_t num_top_logprobs = 0;

  // Blocks holding this sequence's K/V, in position order; managed by the BlockManager.
  std::vector<int32_t> block_table;
  // Tokens whose K/V are in the cache. A running sequence has num_tokens() - 1 after a step (its last
  // sampled token is fed by the next one).
  int64_t num_cached_tokens = 0;
  // The prefix cache's keys of this sequence's full blocks, in order (BlockManager): block i's hash chains
  // block i - 1's with block i's token ids under `hash_salt`, the cache's salt when the chain was computed.
  std::vector<uint64_t> block_hashes;
  uint64_t hash_salt = 0;
  // How many of the leading full blocks are already offered to the cache (or found in it).
  int64_t num_hashed_blocks_registered = 0;

  // Timestamps (seconds since the request started) and policy versions, filled by the engine.
  double scheduled_s = -1, first_token_s = -1, finished_s = -1;
  int64_t first_policy_version = -1, last_policy_version = -1;

 private:
  int64_t id_, prompt_index_;
  uint64_t prompt_id_;
  int64_t sample_index_;
  const std::vector<int32_t>* prompt_;
  std::vector<int32_t> output_;
  std::vector<float> logprobs_;
  SequenceStatus status_ = SequenceStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kLength;
  int64_t num_preemptions_ = 0;
};

}  // namespace rlcpp
