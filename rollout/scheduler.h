// Continuous batching (nano-vllm's scheduler, with prefill and decode mixed in one step). Every step:
//   1. decode: each running sequence, oldest first, gets the slot of its next token; when blocks run out an
//      idle session's blocks are taken first (eviction, below), then the newest running sequence is preempted
//      (blocks released, put back at the front of the queue, recomputed when re-admitted) until the older one
//      fits;
//   2. admit: when nothing was preempted, waiting entries are admitted first come first served while the
//      sequence limit, the step's token budget and the free blocks allow. A fresh group's samples are
//      admitted together and share one prefill of the prompt (as many of them as fit; the rest stay first
//      in line); a preempted sequence is admitted alone and prefills prompt + response so far; a session's next
//      turn (add_continuation) keeps the blocks of its cached tokens and prefills only the tokens after them.
// Finished sequences give their blocks back as soon as the engine marks them (release_finished); a session's
// sequence is parked instead, keeping its blocks for its next turn. Parked sequences (and sessions waiting for a
// turn with blocks) are evicted, least recently used first, only when a running sequence needs a block or
// nothing runs and the next entry cannot be admitted: an evicted one recomputes its context at its next turn.
// Bookkeeping is O(running) per step. With `static_batching` (for comparison: `rlcpp bench rollout`) step 2 admits
// only when no sequence is running, so a batch runs until its longest sequence ends while finished sequences'
// places stay empty: the static batching that continuous batching replaces.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "rollout/block_manager.h"
#include "rollout/sequence.h"

namespace rlcpp {

struct SchedulerConfig {
  int64_t max_num_seqs = 512;             // sequences running at once (the batch limit)
  int64_t max_num_batched_tokens = 8192;  // rows per forward: decode rows + prefill tokens
  bool static_batching = false;           // admit only into an empty batch (see above)
};

// Sequences that share one prefill: the same context (a fresh group's prompt, or one preempted sequence's
// prompt + response, or a session's whole sequence so far), the same blocks, and the logits of the context's
// last row. Rows [sequences[0]->num_cached_tokens, context_tokens) are computed.
struct PrefillUnit {
  std::vector<Sequence*> sequences;
  int64_t context_tokens = 0;
  int64_t cached_tokens = 0;  // of the context, found in the prefix cache: the prefill runs the rest
  bool extends_session = false;  // a session's next turn on the blocks it kept (no prefix-cache lookup)
};

// One engine step: what to run through the model, and the block copies to make first.
struct ScheduledBatch {
  std::vector<PrefillUnit> prefills;
  std::vector<Sequence*> decodes;  // each feeds its last token
  std::vector<BlockCopy> copies;   // copy-on-write, in order, before the forward
  std::vector<Sequence*> preempted;  // this step, for the record

  void clear();
  bool empty() const { return prefills.empty() && decodes.empty(); }
  // Tokens run through the model: a prefill's K/V already cached (the prefix cache's hits, a session's kept
  // tokens) is not. Between schedule and the step's forward.
  int64_t num_rows() const;
  int64_t num_sequences() const;   // sequences that get a token from this step
};

class Scheduler {
 public:
  // `parked`: idle session sequences holding blocks, least recently used first (the engine's list, which the
  // scheduler appends to in release_finished and takes from when it evicts); null when there are none.
  Scheduler(BlockManager& blocks, const SchedulerConfig& config, std::deque<Sequence*>* parked = nullptr);

  // Queues a group's fresh sequences (same prompt, all waiting), admitted together when they fit.
  void add_group(std::vector<Sequence*> sequences);
  // Queues a session's next turn: a waiting sequence that may hold the blocks of its cached tokens.
  void add_continuation(Sequence* sequence);
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  int64_t num_waiting() const;  // sequences
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  int64_t num_evictions() const { return num_evictions_; }

  // Fills `batch` with the next step. Throws when there is work but nothing can ever be scheduled (the
  // cache cannot hold one sequence).
  void schedule(ScheduledBatch& batch);
  // Releases the blocks of running sequences the engine has finished (parks a session's) and drops them from
  // the running list.
  void release_finished();
  // Takes `seq` out at once, waiting or running, and releases its blocks: a request cancelled, or a sequence
  // its caller ends early (then seq->finish(reason) after this). Between steps only.
  void drop(Sequence* seq);
  // Drops every sequence (a request that failed part-way): running ones give their blocks back.
  void drop_all();

  // Between steps: running sequences are running and hold blocks for exactly their cached tokens, waiting and
  // parked ones hold blocks for their cached tokens (none unless they are sessions), the batch limit holds, and
  // the block manager's counts match the block tables.
  void check_invariants() const;

 private:
  void preempt(Sequence* seq, ScheduledBatch& batch);
  void admit(ScheduledBatch& batch, int64_t decode_rows);
  // Frees the blocks of one idle sequence: the least recently parked, else the newest waiting session entry but
  // `keep`. False when there is none.
  bool evict_one(const Sequence* keep);

  BlockManager& blocks_;
  SchedulerConfig config_;
  std::deque<Sequence*>* parked_;
  // Entries admitted as a unit: a fresh group (its not yet admitted samples), one preempted sequence, or one
  // session's turn.
  std::deque<std::vector<Sequence*>> waiting_;
  std::vector<Sequence*> running_;  // admission order: the back is the newest
  std::vector<Sequence*> kept_;     // scratch for schedule
  int64_t num_preemptions_ = 0;
  int64_t num_evictions_ = 0;
};

}  // namespace rlcpp
