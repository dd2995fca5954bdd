#include "rollout/block_manager.h"

#include <xxhash.h>

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

namespace {

// The first block's parent key.
constexpr uint64_t kRootKey = 0x9e3779b97f4a7c15ull;

}  // namespace

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_cache)
    : block_size_(block_size), prefix_cache_(prefix_cache) {
  RLCPP_CHECK(num_blocks > 0 && num_blocks < (int64_t{1} << 31) / std::max<int64_t>(block_size, 1),
              "BlockManager: num_blocks " << num_blocks << " must be positive and its slots fit in int32");
  RLCPP_CHECK(block_size > 0, "BlockManager: block_size must be positive, got " << block_size);
  const size_t n = static_cast<size_t>(num_blocks);
  ref_counts_.assign(n, 0);
  prev_.assign(n + 1, static_cast<int32_t>(n));
  next_.assign(n + 1, static_cast<int32_t>(n));
  keyed_.assign(n, 0);
  key_.assign(n, 0);
  parent_key_.assign(n, 0);
  if (prefix_cache_) tokens_.assign(n * static_cast<size_t>(block_size), 0);
  // Block 0 is handed out first.
  for (int64_t b = 0; b < num_blocks; ++b) push_free_back(static_cast<int32_t>(b));
}

int32_t BlockManager::ref_count(int32_t block) const {
  RLCPP_CHECK(block >= 0 && block < num_blocks(), "BlockManager: block " << block << " outside [0, " << num_blocks()
                                                                          << ")");
  return ref_counts_[block];
}

void BlockManager::push_free_front(int32_t block) {
  const int32_t sentinel = static_cast<int32_t>(num_blocks()), first = next_[sentinel];
  prev_[block] = sentinel;
  next_[block] = first;
  prev_[first] = block;
  next_[sentinel] = block;
  ++num_free_;
}

void BlockManager::push_free_back(int32_t block) {
  const int32_t sentinel = static_cast<int32_t>(num_blocks()), last = prev_[sentinel];
  next_[block] = sentinel;
  prev_[block] = last;
  next_[last] = block;
  prev_[sentinel] = block;
  ++num_free_;
}

void BlockManager::unlink_free(int32_t block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  prev_[block] = next_[block] = kNone;
  --num_free_;
}

void BlockManager::forget_key(int32_t block) {
  if (!keyed_[block]) return;
  const auto it = index_.find(key_[block]);
  if (it != index_.end() && it->second == block) index_.erase(it);
  keyed_[block] = 0;
}

int32_t BlockManager::allocate_block() {
  RLCPP_CHECK(num_free_ > 0, "BlockManager: out of blocks (all " << num_blocks() << " in use)");
  const int32_t b = next_[num_blocks()];
  unlink_free(b);
  RLCPP_CHECK(ref_counts_[b] == 0, "BlockManager: free block " << b << " has " << ref_counts_[b] << " references");
  forget_key(b);  // evicted: its old contents are overwritten
  ref_counts_[b] = 1;
  peak_used_ = std::max(peak_used_, num_used());
  return b;
}

void BlockManager::reuse_block(int32_t block, int32_t references) {
  if (ref_counts_[block] == 0) unlink_free(block);
  ref_counts_[block] += references;
  peak_used_ = std::max(peak_used_, num_used());
}

void BlockManager::release_block(int32_t block) {
  RLCPP_CHECK(block >= 0 && block < num_blocks(), "BlockManager: release of block " << block << " outside [0, "
                                                                                     << num_blocks() << ")");
  RLCPP_CHECK(ref_counts_[block] > 0, "BlockManager: double free of block " << block);
  if (--ref_counts_[block] > 0) return;
  // An indexed block may be found again: it is evicted last. Any other is reused first.
  if (keyed_[block])
    push_free_back(block);
  else
    push_free_front(block);
}

void BlockManager::set_cache_salt(uint64_t salt) {
  salt_ = salt;
  index_.clear();
  std::fill(keyed_.begin(), keyed_.end(), 0);
}

uint64_t BlockManager::block_key(const Sequence& seq, int64_t first, uint64_t parent) const {
  // The parent's key and the salt seed the hash of the block's token ids.
  const uint64_t head[2] = {parent, salt_};
  const uint64_t seed = XXH3_64bits(head, sizeof head);
  std::vector<int32_t> tokens(static_cast<size_t>(block_size_));
  for (int64_t i = 0; i < block_size_; ++i) tokens[static_cast<size_t>(i)] = seq.token_at(first + i);
  return XXH3_64bits_withSeed(tokens.data(), tokens.size() * sizeof(int32_t), seed);
}

bool BlockManager::block_matches(int32_t block, const Sequence& seq, int64_t first, uint64_t parent) const {
  if (!keyed_[block] || parent_key_[block] != parent) return false;
  const int32_t* held = tokens_.data() + static_cast<size_t>(block) * static_cast<size_t>(block_size_);
  for (int64_t i = 0; i < block_size_; ++i)
    if (held[i] != seq.token_at(first + i)) return false;
  return true;
}

int64_t BlockManager::blocks_to_admit(int64_t context_tokens, int64_t count) const {
  const int64_t shared = blocks_for(context_tokens);
  const int64_t first_write = context_tokens % block_size_ == 0 ? count : count - 1;
  return shared + first_write;
}

int64_t BlockManager::allocate_shared(const std::vector<Sequence*>& sequences, int64_t context_tokens) {
  RLCPP_CHECK(!sequences.empty(), "BlockManager: allocate_shared for no sequences");
  const int64_t n = blocks_for(context_tokens);
  RLCPP_CHECK(n <= num_free(), "BlockManager: " << n << " blocks wanted, " << num_free() << " free");
  for (const Sequence* seq : sequences)
    RLCPP_CHECK(seq->block_table.empty(), "BlockManager: sequence " << seq->id() << " already holds "
                                                                   << seq->block_table.size() << " blocks");
  const Sequence& lead = *sequences.front();
  const int32_t references = static_cast<int32_t>(sequences.size());
  std::vector<uint64_t> keys;
  std::vector<int32_t> table;
  table.reserve(static_cast<size_t>(n));
  if (prefix_cache_) {
    const int64_t full = context_tokens / block_size_;
    // The block holding the context's last token is computed whatever the cache holds.
    const int64_t reusable = (context_tokens - 1) / block_size_;
    uint64_t parent = kRootKey;
    bool hit = true;
    for (int64_t i = 0; i < full; ++i) {
      const uint64_t key = block_key(lead, i * block_size_, parent);
      keys.push_back(key);
      if (hit && i < reusable) {
        const auto it = index_.find(key);
        hit = it != index_.end() && block_matches(it->second, lead, i * block_size_, parent);
        if (hit) {
          reuse_block(it->second, references);
          table.push_back(it->second);
        }
      }
      parent = key;
    }
  }
  const int64_t reused = static_cast<int64_t>(table.size());
  while (static_cast<int64_t>(table.size()) < n) {
    const int32_t b = allocate_block();
    ref_counts_[b] = references;
    table.push_back(b);
  }
  for (Sequence* seq : sequences) {
    seq->block_table = table;
    seq->block_hashes = keys;
    seq->hash_salt = salt_;
    seq->num_hashed_blocks_registered = reused;
    seq->num_cached_tokens = reused * block_size_;
  }
  return reused * block_size_;
}

void BlockManager::register_full_blocks(Sequence& seq) {
  if (!prefix_cache_ || seq.hash_salt != salt_) return;
  const int64_t full = std::min<int64_t>(seq.num_cached_tokens / block_size_,
                                         static_cast<int64_t>(seq.block_table.size()));
  for (int64_t i = seq.num_hashed_blocks_registered; i < full; ++i) {
    const uint64_t parent = i == 0 ? kRootKey : seq.block_hashes[static_cast<size_t>(i - 1)];
    if (static_cast<int64_t>(seq.block_hashes.size()) == i)
      seq.block_hashes.push_back(block_key(seq, i * block_size_, parent));
    const uint64_t key = seq.block_hashes[static_cast<size_t>(i)];
    const int32_t b = seq.block_table[static_cast<size_t>(i)];
    if (!keyed_[b] && index_.find(key) == index_.end()) {
      index_.emplace(key, b);
      keyed_[b] = 1;
      key_[b] = key;
      parent_key_[b] = parent;
      int32_t* held = tokens_.data() + static_cast<size_t>(b) * static_cast<size_t>(block_size_);
      for (int64_t t = 0; t < block_size_; ++t) held[t] = seq.token_at(i * block_size_ + t);
    }
  }
  seq.num_hashed_blocks_registered = std::max(seq.num_hashed_blocks_registered, full);
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
  return num_free_ > 0;
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
  // Reverse order: of an unindexed run, the sequence's first block ends on top of the free list and is reused
  // first; of an indexed one, its last block is evicted first (a longer prefix is the less likely to recur).
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release_block(*it);
  seq.block_table.clear();
  seq.num_cached_tokens = 0;
  seq.num_hashed_blocks_registered = 0;
}

void BlockManager::check_invariants(const std::vector<const Sequence*>& live) const {
  const int64_t n = num_blocks();
  std::vector<int32_t> refs(static_cast<size_t>(n), 0), in_free(static_cast<size_t>(n), 0);
  int64_t listed = 0;
  for (int32_t b = next_[n]; b != n; b = next_[b]) {
    RLCPP_CHECK(b >= 0 && b < n, "BlockManager invariant: free list holds block " << b << " outside [0, " << n << ")");
    RLCPP_CHECK(++in_free[b] == 1, "BlockManager invariant: block " << b << " is on the free list twice");
    RLCPP_CHECK(next_[b] >= 0 && prev_[next_[b]] == b, "BlockManager invariant: free list broken after block " << b);
    ++listed;
  }
  RLCPP_CHECK(listed == num_free_, "BlockManager invariant: " << listed << " blocks on the free list, counted "
                                                              << num_free_);
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
    if (keyed_[b]) {
      const auto it = index_.find(key_[b]);
      RLCPP_CHECK(it != index_.end() && it->second == b,
                  "BlockManager invariant: block " << b << " is marked cached but the index does not hold it");
    }
  }
  for (const auto& [key, b] : index_)
    RLCPP_CHECK(b >= 0 && b < n && keyed_[b] && key_[b] == key,
                "BlockManager invariant: the index maps a key to block " << b << ", which does not hold it");
}

}  // namespace rlcpp
