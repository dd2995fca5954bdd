#include "rollout/sequence.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

const char* sequence_status_name(SequenceStatus status) {
  switch (status) {
    case SequenceStatus::kWaiting: return "waiting";
    case SequenceStatus::kRunning: return "running";
    case SequenceStatus::kPreempted: return "preempted";
    case SequenceStatus::kFinished: return "finished";
  }
  return "?";
}

Sequence::Sequence(int64_t id, int64_t prompt_index, uint64_t prompt_id, int64_t sample_index,
                   const std::vector<int32_t>& prompt)
    : id_(id), prompt_index_(prompt_index), prompt_id_(prompt_id), sample_index_(sample_index), prompt_(&prompt) {}

void Sequence::admit() {
  RLCPP_CHECK(status_ == SequenceStatus::kWaiting || status_ == SequenceStatus::kPreempted,
              "sequence " << id_ << ": admit from state " << sequence_status_name(status_));
  status_ = SequenceStatus::kRunning;
  started_ = true;
}

void Sequence::preempt() {
  RLCPP_CHECK(status_ == SequenceStatus::kRunning,
              "sequence " << id_ << ": preempt from state " << sequence_status_name(status_));
  RLCPP_CHECK(block_table.empty(), "sequence " << id_ << ": preempted while holding " << block_table.size()
                                               << " blocks");
  status_ = SequenceStatus::kPreempted;
  num_cached_tokens = 0;
  ++num_preemptions_;
}

void Sequence::finish(FinishReason reason) {
  RLCPP_CHECK(status_ == SequenceStatus::kRunning,
              "sequence " << id_ << ": finish from state " << sequence_status_name(status_));
  status_ = SequenceStatus::kFinished;
  finish_reason_ = reason;
}

void Sequence::begin_turn() {
  RLCPP_CHECK(status_ == SequenceStatus::kFinished || (status_ == SequenceStatus::kWaiting && !started_),
              "sequence " << id_ << ": a turn begins after the previous one ended, not from state "
                          << sequence_status_name(status_));
  status_ = SequenceStatus::kWaiting;
  turn_begin_ = num_output();
}

void Sequence::append_external(std::span<const int32_t> tokens) {
  RLCPP_CHECK(status_ == SequenceStatus::kFinished || (status_ == SequenceStatus::kWaiting && !started_),
              "sequence " << id_ << ": tokens are appended between turns, not while "
                          << sequence_status_name(status_));
  for (int32_t t : tokens) {
    output_.push_back(t);
    logprobs_.push_back(0.0f);
    origins_.push_back(TokenOrigin::kAppended);
    versions_.push_back(-1);
  }
}

void Sequence::count_kv_rows(int64_t upto) {
  if (upto <= num_cached_tokens) return;
  kv_rows += upto - num_cached_tokens;
  kv_rows_recomputed += std::max<int64_t>(0, std::min(upto, kv_high_water_) - num_cached_tokens);
  kv_high_water_ = std::max(kv_high_water_, upto);
}

}  // namespace rlcpp
