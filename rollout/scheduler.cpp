#include "rollout/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

void ScheduledBatch::clear() {
  prefills.clear();
  decodes.clear();
  copies.clear();
  preempted.clear();
}

int64_t ScheduledBatch::num_rows() const {
  int64_t rows = static_cast<int64_t>(decodes.size());
  for (const PrefillUnit& u : prefills) rows += u.context_tokens - u.sequences.front()->num_cached_tokens;
  return rows;
}

int64_t ScheduledBatch::num_sequences() const {
  int64_t n = static_cast<int64_t>(decodes.size());
  for (const PrefillUnit& u : prefills) n += static_cast<int64_t>(u.sequences.size());
  return n;
}

Scheduler::Scheduler(BlockManager& blocks, const SchedulerConfig& config, std::deque<Sequence*>* parked)
    : blocks_(blocks), config_(config), parked_(parked) {
  RLCPP_CHECK(config_.max_num_seqs >= 1, "scheduler: max_num_seqs must be >= 1, got " << config_.max_num_seqs);
  RLCPP_CHECK(config_.max_num_batched_tokens >= 1,
              "scheduler: max_num_batched_tokens must be >= 1, got " << config_.max_num_batched_tokens);
  running_.reserve(static_cast<size_t>(std::min<int64_t>(config_.max_num_seqs, 1 << 16)));
}

void Scheduler::add_group(std::vector<Sequence*> sequences) {
  RLCPP_CHECK(!sequences.empty(), "scheduler: empty group");
  for (const Sequence* s : sequences)
    RLCPP_CHECK(s->status() == SequenceStatus::kWaiting && s->num_output() == 0 &&
                    s->prompt_index() == sequences[0]->prompt_index(),
                "scheduler: group members must be fresh waiting samples of one prompt (sequence " << s->id() << ")");
  waiting_.push_back(std::move(sequences));
}

void Scheduler::add_continuation(Sequence* sequence) {
  RLCPP_CHECK(sequence != nullptr && sequence->status() == SequenceStatus::kWaiting,
              "scheduler: a continuation must be a waiting sequence (its turn begun)");
  RLCPP_CHECK(static_cast<int64_t>(sequence->block_table.size()) == blocks_.blocks_for(sequence->num_cached_tokens),
              "scheduler: continuation sequence " << sequence->id() << " holds " << sequence->block_table.size()
                                                  << " blocks for " << sequence->num_cached_tokens << " cached tokens");
  if (parked_) std::erase(*parked_, sequence);  // its blocks are in the queue's care now
  waiting_.push_back({sequence});
}

bool Scheduler::evict_one(const Sequence* keep) {
  if (parked_ && !parked_->empty()) {
    Sequence* s = parked_->front();
    parked_->pop_front();
    blocks_.release(*s);
    ++num_evictions_;
    return true;
  }
  for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it) {
    Sequence* s = it->front();
    if (it->size() == 1 && s != keep && !s->block_table.empty()) {
      blocks_.release(*s);
      ++num_evictions_;
      return true;
    }
  }
  return false;
}

int64_t Scheduler::num_waiting() const {
  int64_t n = 0;
  for (const auto& entry : waiting_) n += static_cast<int64_t>(entry.size());
  return n;
}

void Scheduler::preempt(Sequence* seq, ScheduledBatch& batch) {
  blocks_.release(*seq);
  seq->preempt();
  waiting_.push_front({seq});
  batch.preempted.push_back(seq);
  ++num_preemptions_;
}

void Scheduler::schedule(ScheduledBatch& batch) {
  batch.clear();
  kept_.clear();
  // Decode every running sequence, oldest first; preempt from the newest end when blocks run out.
  size_t end = running_.size();
  for (size_t i = 0; i < end; ++i) {
    Sequence* seq = running_[i];
    bool preempted_self = false;
    while (!blocks_.can_append(*seq)) {
      if (evict_one(nullptr)) continue;  // an idle session's blocks before a running sequence's
      if (end - 1 > i) {
        preempt(running_[--end], batch);
      } else {
        preempt(seq, batch);
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    blocks_.append_slot(*seq, batch.copies);
    kept_.push_back(seq);
    batch.decodes.push_back(seq);
  }
  running_.swap(kept_);
  // Admitting while preempting would only take back the blocks just freed for older sequences.
  const bool batch_open = !config_.static_batching || running_.empty();
  if (batch.preempted.empty() && batch_open) admit(batch, static_cast<int64_t>(batch.decodes.size()));
  RLCPP_CHECK(!batch.empty() || !has_work(),
              "scheduler: nothing can run: " << num_waiting() << " sequences wait, the first needs "
                                             << waiting_.front().front()->num_tokens() << " tokens of context, "
                                             << blocks_.num_free() << " of " << blocks_.num_blocks()
                                             << " blocks are free, token budget " << config_.max_num_batched_tokens);
}

void Scheduler::admit(ScheduledBatch& batch, int64_t decode_rows) {
  int64_t rows = decode_rows;
  int64_t reserved = 0;  // blocks the units admitted this step need for their first new token
  while (!waiting_.empty()) {
    std::vector<Sequence*>& entry = waiting_.front();
    const int64_t room = config_.max_num_seqs - static_cast<int64_t>(running_.size());
    if (room <= 0) break;
    Sequence* lead = entry.front();
    const int64_t context = lead->num_tokens();
    if (rows + context - lead->num_cached_tokens > config_.max_num_batched_tokens) break;
    // A session that holds the blocks of its cached tokens: extend them, prefill only the new tokens.
    const bool extend = entry.size() == 1 && !lead->block_table.empty();
    int64_t count = extend ? 1 : std::min<int64_t>(static_cast<int64_t>(entry.size()), room);
    const auto needed = [&](int64_t c) {
      return extend ? blocks_.blocks_to_extend(*lead, context) : blocks_.blocks_to_admit(context, c);
    };
    while (count > 0 && needed(count) > blocks_.num_free() - reserved) --count;
    // Nothing runs that could free blocks: an idle session's go (it recomputes at its next turn).
    if (count == 0 && running_.empty() && batch.prefills.empty() && evict_one(lead)) continue;
    if (count == 0) break;

    PrefillUnit unit;
    unit.context_tokens = context;
    if (extend) {
      unit.sequences = {lead};
      unit.extends_session = true;
      waiting_.pop_front();
      reserved += context % blocks_.block_size() == 0 ? 1 : 0;
      blocks_.extend(*lead, context, batch.copies);
    } else {
      unit.sequences.assign(entry.begin(), entry.begin() + count);
      entry.erase(entry.begin(), entry.begin() + count);
      if (entry.empty()) waiting_.pop_front();
      unit.cached_tokens = blocks_.allocate_shared(unit.sequences, context);
      reserved += blocks_.blocks_to_admit(context, count) - blocks_.blocks_for(context);
    }
    for (Sequence* s : unit.sequences) {
      s->admit();
      running_.push_back(s);
    }
    rows += context - unit.sequences.front()->num_cached_tokens;
    batch.prefills.push_back(std::move(unit));
  }
}

void Scheduler::release_finished() {
  std::erase_if(running_, [&](Sequence* s) {
    if (s->status() != SequenceStatus::kFinished) return false;
    if (s->keeps_blocks && parked_)
      parked_->push_back(s);
    else
      blocks_.release(*s);
    return true;
  });
}

void Scheduler::drop(Sequence* seq) {
  const auto running = std::find(running_.begin(), running_.end(), seq);
  if (running != running_.end()) {
    blocks_.release(*seq);
    running_.erase(running);
    return;
  }
  for (auto entry = waiting_.begin(); entry != waiting_.end(); ++entry) {
    const auto it = std::find(entry->begin(), entry->end(), seq);
    if (it == entry->end()) continue;
    entry->erase(it);
    if (entry->empty()) waiting_.erase(entry);
    return;
  }
}

void Scheduler::drop_all() {
  for (Sequence* seq : running_) blocks_.release(*seq);
  running_.clear();
  waiting_.clear();
}

void Scheduler::check_invariants() const {
  RLCPP_CHECK(static_cast<int64_t>(running_.size()) <= config_.max_num_seqs,
              "scheduler invariant: " << running_.size() << " running, the limit is " << config_.max_num_seqs);
  std::vector<const Sequence*> live;
  for (const Sequence* s : running_) {
    RLCPP_CHECK(s->status() == SequenceStatus::kRunning, "scheduler invariant: sequence "
                                                             << s->id() << " is in the running list but "
                                                             << sequence_status_name(s->status()));
    RLCPP_CHECK(s->num_cached_tokens == s->num_tokens() - 1,
                "scheduler invariant: running sequence " << s->id() << " has " << s->num_cached_tokens
                                                         << " cached of " << s->num_tokens() << " tokens");
    live.push_back(s);
  }
  for (const auto& entry : waiting_) {
    RLCPP_CHECK(!entry.empty(), "scheduler invariant: empty waiting entry");
    for (const Sequence* s : entry) {
      RLCPP_CHECK(s->status() == SequenceStatus::kWaiting || s->status() == SequenceStatus::kPreempted,
                  "scheduler invariant: sequence " << s->id() << " waits but is " << sequence_status_name(s->status()));
      RLCPP_CHECK(s->block_table.empty() || (entry.size() == 1 && s->keeps_blocks),
                  "scheduler invariant: waiting sequence " << s->id() << " holds " << s->block_table.size()
                                                           << " blocks");
      live.push_back(s);
    }
  }
  if (parked_)
    for (const Sequence* s : *parked_) {
      RLCPP_CHECK(s->status() == SequenceStatus::kFinished && s->keeps_blocks,
                  "scheduler invariant: parked sequence " << s->id() << " is " << sequence_status_name(s->status()));
      live.push_back(s);
    }
  blocks_.check_invariants(live);
}

}  // namespace rlcpp
