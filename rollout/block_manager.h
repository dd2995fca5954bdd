// The paged KV cache's bookkeeping: fixed-size blocks of block_size token slots, each with a reference
// count, and a free list. Sequences of one group share their prompt's blocks (one reference each); the first
// write into a shared, partly filled block copies it (copy-on-write), so siblings never see each other's
// tokens. The K/V data itself lives in model/KVCache; this class only decides which block holds what and
// records the copies the engine must make before the next forward.
#pragma once

#include <cstdint>
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
  BlockManager(int64_t num_blocks, int64_t block_size);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_counts_.size()); }
  int64_t block_size() const { return block_size_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used() const { return num_blocks() - num_free(); }
  int64_t peak_used() const { return peak_used_; }
  void reset_peak() { peak_used_ = num_used(); }
  int32_t ref_count(int32_t block) const;
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Blocks needed to admit `count` sequences sharing a context of `context_tokens` tokens and to give each
  // the slot of its first new token: the shared blocks, plus one block per sequence when the context ends
  // on a block boundary, else one copy-on-write block per sequence but the last.
  int64_t blocks_to_admit(int64_t context_tokens, int64_t count) const;
  // Allocates the shared context blocks once, with one reference per sequence; sets each block table.
  void allocate_shared(const std::vector<Sequence*>& sequences, int64_t context_tokens);

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

  // Throws naming the block when reference counts, the free list and `live` sequences' block tables
  // disagree: each block is free exactly once or referenced, and its count equals the number of tables
  // holding it. O(blocks + total table length).
  void check_invariants(const std::vector<const Sequence*>& live) const;

 private:
  int32_t allocate_block();
  void release_block(int32_t block);

  int64_t block_size_;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  int64_t peak_used_ = 0;
};

}  // namespace rlcpp
