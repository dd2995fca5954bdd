// The paged KV cache's bookkeeping: fixed-size blocks of block_size token slots, each with a reference
// count, and a free list. Sequences of one group share their prompt's blocks (one reference each); the first
// write into a shared, partly filled block copies it (copy-on-write), so siblings never see each other's
// tokens. The K/V data itself lives in model/KVCache; this class only decides which block holds what and
// records the copies the engine must make before the next forward.
//
// The prefix cache (nano-vllm's hash chain, with a salt): a full block's key is a hash of (its parent block's
// key, its block_size token ids, the salt), so equal keys mean equal prefixes up to the end of that block. A
// full block whose K/V has been computed enters the index (register_full_blocks, after the forward that
// computed it); a new sequence reuses the longest chain of indexed blocks that its context starts with
// (allocate_shared), taking a reference instead of a prefill. Released blocks keep their contents on the free
// list: an indexed block goes to the back and is reused last (LRU eviction, which drops it from the index), a
// block holding nothing reusable to the front. The engine's salt covers its policy version and numerics and
// changes with every set_weights (set_cache_salt drops the whole index), so K/V computed by older weights is
// never reused. A group's samples sharing one prefill is the cache's special case: allocate_shared gives the
// group's sequences the same blocks, found in the index or allocated once, with one reference each.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "rollout/sequence.h"

namespace rlcpp {

// Copy the first `num_tokens` slots of block `src` into block `dst` (every layer, K and V).
struct BlockCopy {
  int32_t src = 0, dst = 0;
  int32_t num_tokens = 0;
};

class BlockManager {
 public:
  // `prefix_cache` false: no lookups and no index (groups still share their prompt's blocks).
  BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_cache = false);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_counts_.size()); }
  int64_t block_size() const { return block_size_; }
  int64_t num_free() const { return num_free_; }
  int64_t num_used() const { return num_blocks() - num_free(); }
  int64_t peak_used() const { return peak_used_; }
  void reset_peak() { peak_used_ = num_used(); }
  int32_t ref_count(int32_t block) const;
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  bool prefix_cache() const { return prefix_cache_; }
  // Blocks in the index, free or in use.
  int64_t num_cached_blocks() const { return static_cast<int64_t>(index_.size()); }
  // Keys computed from now on use `salt`; every indexed block is dropped from the index (its contents can no
  // longer be found), so nothing computed before is reused after.
  void set_cache_salt(uint64_t salt);
  uint64_t cache_salt() const { return salt_; }

  // Blocks needed to admit `count` sequences sharing a context of `context_tokens` tokens and to give each
  // the slot of its first new token: the shared blocks, plus one block per sequence when the context ends
  // on a block boundary, else one copy-on-write block per sequence but the last. An upper bound when part of
  // the context is cached.
  int64_t blocks_to_admit(int64_t context_tokens, int64_t count) const;
  // Gives the sequences (one group, or one preempted sequence) the blocks of their shared context, one
  // reference per sequence: the longest run of indexed blocks the context starts with, at most up to the block
  // holding its last token (that one is always computed, so the step has a row whose logits feed the first
  // draw), then fresh blocks. Sets each sequence's block table, its key chain and num_cached_tokens (the reused
  // tokens, which the prefill skips); returns that count.
  int64_t allocate_shared(const std::vector<Sequence*>& sequences, int64_t context_tokens);
  // After the forward that computed them: the sequence's full blocks up to num_cached_tokens enter the index
  // (one already indexed under the same key stays the indexed one). A chain computed under an older salt
  // registers nothing: that sequence's K/V mixes policy versions.
  void register_full_blocks(Sequence& seq);

  // A sequence that holds the blocks of its cached tokens (a session between turns) and has more context now:
  // blocks needed to give it slots for positions [num_cached_tokens, context_tokens) and its first new token (a
  // copy of a shared last block it writes into, the new blocks, one more when the context ends on a boundary).
  int64_t blocks_to_extend(const Sequence& seq, int64_t context_tokens) const;
  // Makes those slots writable: copies a shared last block (recorded in `copies`), appends new blocks.
  void extend(Sequence& seq, int64_t context_tokens, std::vector<BlockCopy>& copies);

  // Whether `seq` can get the slot of position num_tokens() - 1 (the token the next step feeds): true when
  // it is already in a block the sequence owns alone, else a free block is needed.
  bool can_append(const Sequence& seq) const;
  // Makes that slot writable: appends a new block at a block boundary, or replaces a shared last block by
  // a private copy (recorded in `copies`). Returns the slot.
  int32_t append_slot(Sequence& seq, std::vector<BlockCopy>& copies);
  // Slot of `position` in the sequence's blocks.
  int32_t slot_of(const Sequence& seq, int64_t position) const {
    return seq.block_table[position / block_size_] * static_cast<int32_t>(block_size_) +
           static_cast<int32_t>(position % block_size_);
  }

  // Drops the sequence's reference to each of its blocks; blocks nobody references go back to the free list.
  void release(Sequence& seq);

  // Throws naming the block when reference counts, the free list, the index and `live` sequences' block
  // tables disagree: each block is free exactly once or referenced, its count equals the number of tables
  // holding it, and the index and the blocks' keys match. O(blocks + total table length).
  void check_invariants(const std::vector<const Sequence*>& live) const;

 private:
  static constexpr int32_t kNone = -1;

  int32_t allocate_block();
  void release_block(int32_t block);
  // Takes a reference to an indexed block, off the free list when nobody held it.
  void reuse_block(int32_t block, int32_t references);
  // The key of the block of `seq` starting at token `first`, chained to `parent`.
  uint64_t block_key(const Sequence& seq, int64_t first, uint64_t parent) const;
  // Whether indexed `block` holds `seq`'s tokens [first, first + block_size) after the block keyed `parent`.
  bool block_matches(int32_t block, const Sequence& seq, int64_t first, uint64_t parent) const;
  void forget_key(int32_t block);

  // The free list, least recently released first (allocation takes the front), as a doubly linked list over
  // block ids with sentinel num_blocks().
  void push_free_front(int32_t block);
  void push_free_back(int32_t block);
  void unlink_free(int32_t block);

  int64_t block_size_;
  bool prefix_cache_;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> prev_, next_;  // free-list links (num_blocks() + 1 entries, the last the sentinel)
  int64_t num_free_ = 0;
  int64_t peak_used_ = 0;

  uint64_t salt_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;  // key -> block holding those tokens
  std::vector<uint8_t> keyed_;                   // per block: whether it is in the index under key_[b]
  std::vector<uint64_t> key_, parent_key_;       // per block: its key and its parent block's
  std::vector<int32_t> tokens_;                  // per block: the block_size token ids it holds (keyed blocks)
};

}  // namespace rlcpp
