#include "rollout/sequence.h"

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

}  // namespace rlcpp
