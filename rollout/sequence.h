// One sample being generated: its tokens, its block table, and its place in the state machine
//   waiting --admit--> running --finish--> finished
//                      running --preempt--> preempted --admit (recompute)--> running
// A preempted sequence has given back its blocks; on re-admission it prefills prompt + response so far.
//
// A session's sequence (rollout/README.md "Sessions") lives on after `finished`: its turn has ended and it keeps
// its blocks (the K/V of every token but the last, which the next turn feeds). Tokens of known origin may then be
// appended (an observation, a tool's reply), and begin_turn() puts it back in line:
//   finished --append_external*, begin_turn--> waiting (holding its blocks) --admit--> running ...
// Every token after the prompt records its origin, its log-prob (0 for appended ones) and the policy version
// that sampled it (-1 for appended ones).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rollout/request.h"

namespace rlcpp {

enum class SequenceStatus { kWaiting, kRunning, kPreempted, kFinished };
const char* sequence_status_name(SequenceStatus status);

// Where a token after the prompt came from.
enum class TokenOrigin : uint8_t { kSampled = 0, kAppended = 1 };

class Sequence {
 public:
  // `prompt` must outlive the sequence (it is the request's, or its session's).
  Sequence(int64_t id, int64_t prompt_index, uint64_t prompt_id, int64_t sample_index,
           const std::vector<int32_t>& prompt);

  int64_t id() const { return id_; }  // index of its Sample in the result (prompt-major), or its session's id
  int64_t prompt_index() const { return prompt_index_; }
  uint64_t prompt_id() const { return prompt_id_; }
  int64_t sample_index() const { return sample_index_; }

  SequenceStatus status() const { return status_; }
  void admit();                        // waiting | preempted -> running
  void preempt();                      // running -> preempted (blocks already released)
  void finish(FinishReason reason);    // running -> finished
  // finished (a session between turns) or waiting and never admitted -> waiting, counting the turn's new tokens
  // from here; keeps the blocks it holds.
  void begin_turn();
  FinishReason finish_reason() const { return finish_reason_; }
  int64_t num_preemptions() const { return num_preemptions_; }

  int64_t prompt_len() const { return static_cast<int64_t>(prompt_->size()); }
  int64_t num_output() const { return static_cast<int64_t>(output_.size()); }
  int64_t num_tokens() const { return prompt_len() + num_output(); }
  // Tokens the current turn has sampled (all of num_output() for a one-turn sample).
  int64_t num_turn_output() const { return num_output() - turn_begin_; }
  int64_t turn_begin() const { return turn_begin_; }
  int32_t token_at(int64_t position) const {
    return position < prompt_len() ? (*prompt_)[position] : output_[position - prompt_len()];
  }
  int32_t last_token() const { return token_at(num_tokens() - 1); }
  const std::vector<int32_t>& prompt() const { return *prompt_; }
  const std::vector<int32_t>& output() const { return output_; }
  const std::vector<float>& logprobs() const { return logprobs_; }
  const std::vector<TokenOrigin>& origins() const { return origins_; }
  const std::vector<int64_t>& versions() const { return versions_; }
  void append(int32_t token, float logprob, int64_t policy_version = -1) {
    output_.push_back(token);
    logprobs_.push_back(logprob);
    origins_.push_back(TokenOrigin::kSampled);
    versions_.push_back(policy_version);
  }
  // Tokens that were not sampled (an environment's observation): finished (between turns) or never admitted only.
  void append_external(std::span<const int32_t> tokens);

  // How its tokens are drawn and when it stops (not owned; must outlive the sequence): the engine's generate
  // and run_turns set it; a caller driving Engine::step sets it per sequence.
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
  // Positions whose K/V this sequence has had computed (a shared prefill counts for each sharer), and of those
  // the ones computed again after preemption or eviction: with the K/V kept, every position is computed once.
  int64_t kv_rows = 0, kv_rows_recomputed = 0;
  // Records that the K/V of positions [num_cached_tokens, upto) is being computed for this sequence.
  void count_kv_rows(int64_t upto);

  // Timestamps (seconds since the request started) and policy versions, filled by the engine.
  double scheduled_s = -1, first_token_s = -1, finished_s = -1;
  int64_t first_policy_version = -1, last_policy_version = -1;
  // A session's sequence keeps its blocks when its turn ends (the scheduler parks it instead of freeing them).
  bool keeps_blocks = false;

 private:
  int64_t id_, prompt_index_;
  uint64_t prompt_id_;
  int64_t sample_index_;
  const std::vector<int32_t>* prompt_;
  std::vector<int32_t> output_;
  std::vector<float> logprobs_;
  std::vector<TokenOrigin> origins_;
  std::vector<int64_t> versions_;
  int64_t turn_begin_ = 0;
  bool started_ = false;       // admitted at least once
  int64_t kv_high_water_ = 0;  // positions [0, kv_high_water_) have had their K/V computed at least once
  SequenceStatus status_ = SequenceStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kLength;
  int64_t num_preemptions_ = 0;
};

}  // namespace rlcpp
