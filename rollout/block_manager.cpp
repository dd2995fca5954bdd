#include "rollout/block_manager.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size) : block_size_(block_size) {
  RLCPP_CHECK(num_blocks > 0 && num_blocks < (int64_t{1} << 31) / std::max<int64_t>(block_size, 1),
              "BlockManager: num_blocks " << num_blocks << " must be positive and its slots fit in int32");
  RLCPP_CHECK(block_size > 0, "BlockManager: block_size must be positive, got " << block_size);
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  free_.reserve(static_cast<size_t>(num_blocks));
  // Block 0 is handed out first.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int32_t BlockManager::ref_count(int32_t block) const {
  RLCPP_CHECK(block >= 0 && block < num_blocks(), "BlockManager: block " << block << " outside [0, " << num_blocks()
                                                                          << ")");
  return ref_counts_[block];
}

int32_t BlockManager::allocate_block() {
  RLCPP_CHECK(!free_.empty(), "BlockManager: out of blocks (all " << num_blocks() << " in use)");
  const int32_t b = free_.back();
  free_.pop_back();
  RLCPP_CHECK(ref_counts_[b] == 0, "BlockManager: free block " << b << " has " << ref_counts_[b] << " references");
  ref_counts_[b] = 1;
  peak_used_ = std::max(peak_used_, num_used());
  return b;
}

void BlockManager::release_block(int32_t block) {
  RLCPP_CHECK(block >= 0 && block < num_blocks(), "BlockManager: release of block " << block << " outside [0, "
                                                                                     << num_blocks() << ")");
  RLCPP_CHECK(ref_counts_[block] > 0, "BlockManager: double free of block " << block);
  if (--ref_counts_[block] == 0) free_.push_back(block);
}

int64_t BlockManager::blocks_to_admit(int64_t context_tokens, int64_t count) const {
  const int64_t shared = blocks_for(context_tokens);
  const int64_t first_write = context_tokens % block_size_ == 0 ? count : count - 1;
  return shared + first_write;
}

void BlockManager::allocate_shared(const std::vector<Sequence*>& sequences, int64_t context_tokens) {
  RLCPP_CHECK(!sequences.empty(), "BlockManager: allocate_shared for no sequences");
  const int64_t n = blocks_for(context_tokens);
  RLCPP_CHECK(n <= num_free(), "BlockManager: " << n << " blocks wanted, " << num_free() << " free");
  std::vector<int32_t> table;
  table.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = allocate_block();
    ref_counts_[b] = static_cast<int32_t>(sequences.size());
    table.push_back(b);
  }
  for (Sequence* seq : sequences) {
    RLCPP_CHECK(seq->block_table.empty(), "BlockManager: sequence " << seq->id() << " already holds "
                                                                   << seq->block_table.size() << " blocks");
    seq->block_table = table;
  }
}

int64_t BlockManager::blocks_to_extend(const Sequence& seq, int64_t context_tokens) const {
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  const bool copy = seq.num_cached_tokens % block_size_ != 0 && have > 0 && seq.num_cached_tokens < context_tokens &&
                    ref_counts_[seq.block_table.back()] > 1;
  return (copy ? 1 : 0) + std::max<int64_t>(0, blocks_for(context_tokens) - have) +
         (context_tokens % block_size_ == 0 ? 1 : 0);
}

void BlockManager::extend(Sequence& seq, int64_t context_tokens, std::vector<BlockCopy>& copies) {
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  RLCPP_CHECK(have == blocks_for(seq.num_cached_tokens) && context_tokens >= seq.num_cached_tokens,
              "BlockManager: sequence " << seq.id() << " holds " << have << " blocks for " << seq.num_cached_tokens
                                        << " cached tokens and is extended to " << context_tokens);
  const int64_t new_blocks = std::max<int64_t>(0, blocks_for(context_tokens) - have);
  const bool copy = seq.num_cached_tokens % block_size_ != 0 && have > 0 && seq.num_cached_tokens < context_tokens &&
                    ref_counts_[seq.block_table.back()] > 1;
  RLCPP_CHECK(new_blocks + (copy ? 1 : 0) <= num_free(),
              "BlockManager: " << new_blocks + (copy ? 1 : 0) << " blocks wanted, " << num_free() << " free");
  if (copy) {  // the cached slots of the shared last block are this sequence's context; the rest it writes
    const int32_t shared = seq.block_table.back();
    const int32_t own = allocate_block();
    copies.push_back({shared, own, static_cast<int32_t>(seq.num_cached_tokens % block_size_)});
    release_block(shared);
    seq.block_table.back() = own;
  }
  for (int64_t i = 0; i < new_blocks; ++i) seq.block_table.push_back(allocate_block());
}

bool BlockManager::can_append(const Sequence& seq) const {
  const int64_t position = seq.num_tokens() - 1;
  const int64_t index = position / block_size_;
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  if (index < have - 1) return true;  // recomputed context already covers it (not reached in decode)
  if (index == have - 1 && ref_counts_[seq.block_table.back()] == 1) return true;
  return !free_.empty();
}

int32_t BlockManager::append_slot(Sequence& seq, std::vector<BlockCopy>& copies) {
  const int64_t position = seq.num_tokens() - 1;
  const int64_t index = position / block_size_;
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  RLCPP_CHECK(index <= have, "BlockManager: sequence " << seq.id() << " position " << position << " skips a block ("
                                                       << have << " blocks held)");
  if (index == have) {
    seq.block_table.push_back(allocate_block());
  } else if (index == have - 1 && ref_counts_[seq.block_table.back()] > 1) {
    // Copy-on-write: the slots before `position` are the shared context; this sequence gets its own copy.
    const int32_t shared = seq.block_table.back();
    const int32_t own = allocate_block();
    copies.push_back({shared, own, static_cast<int32_t>(position % block_size_)});
    release_block(shared);
    seq.block_table.back() = own;
  }
  return slot_of(seq, position);
}

void BlockManager::release(Sequence& seq) {
  // Reverse order puts the sequence's first block on top of the free stack last, so it is reused first.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release_block(*it);
  seq.block_table.clear();
  seq.num_cached_tokens = 0;
}

void BlockManager::check_invariants(const std::vector<const Sequence*>& live) const {
  const int64_t n = num_blocks();
  std::vector<int32_t> refs(static_cast<size_t>(n), 0), in_free(static_cast<size_t>(n), 0);
  for (int32_t b : free_) {
    RLCPP_CHECK(b >= 0 && b < n, "BlockManager invariant: free list holds block " << b << " outside [0, " << n << ")");
    RLCPP_CHECK(++in_free[b] == 1, "BlockManager invariant: block " << b << " is on the free list twice");
  }
  for (const Sequence* seq : live) {
    for (int32_t b : seq->block_table) {
      RLCPP_CHECK(b >= 0 && b < n, "BlockManager invariant: sequence " << seq->id() << " holds block " << b
                                                                       << " outside [0, " << n << ")");
      ++refs[b];
    }
    const int64_t held = static_cast<int64_t>(seq->block_table.size());
    RLCPP_CHECK(held == blocks_for(seq->num_cached_tokens),
                "BlockManager invariant: sequence " << seq->id() << " holds " << held << " blocks for "
                                                    << seq->num_cached_tokens << " cached tokens");
  }
  for (int64_t b = 0; b < n; ++b) {
    RLCPP_CHECK(ref_counts_[b] == refs[b], "BlockManager invariant: block " << b << " has reference count "
                                                                            << ref_counts_[b] << " but " << refs[b]
                                                                            << " block tables hold it");
    RLCPP_CHECK((ref_counts_[b] == 0) == (in_free[b] == 1),
                "BlockManager invariant: block " << b << " with " << ref_counts_[b] << " references is "
                                                 << (in_free[b] ? "" : "not ") << "on the free list");
  }
}

}  // namespace rlcpp
