#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "rollout/block_manager.h"

namespace rlcpp {
namespace {

// Sequences over one prompt of `prompt_len` tokens (ids 1..).
struct Group {
  std::vector<int32_t> prompt;
  std::vector<std::unique_ptr<Sequence>> seqs;
  Group(int64_t prompt_len, int64_t n) {
    for (int64_t t = 0; t < prompt_len; ++t) prompt.push_back(static_cast<int32_t>(t + 1));
    for (int64_t i = 0; i < n; ++i) seqs.push_back(std::make_unique<Sequence>(i, 0, 0, i, prompt));
  }
  std::vector<Sequence*> ptrs() {
    std::vector<Sequence*> out;
    for (auto& s : seqs) out.push_back(s.get());
    return out;
  }
  std::vector<const Sequence*> live() {
    std::vector<const Sequence*> out;
    for (auto& s : seqs) out.push_back(s.get());
    return out;
  }
  // As after a prefill step: the context is cached and each sample drew its first token.
  void prefilled(int32_t token) {
    for (auto& s : seqs) {
      s->num_cached_tokens = s->num_tokens();
      s->append(token, 0.0f);
    }
  }
};

TEST(BlockManager, GroupSharesPromptBlocksWithOneReferenceEach) {
  BlockManager bm(10, 16);
  Group g(20, 3);
  EXPECT_EQ(bm.blocks_to_admit(20, 3), 2 + 2);  // 2 shared blocks, copy-on-write for 2 of the 3
  bm.allocate_shared(g.ptrs(), 20);
  EXPECT_EQ(bm.num_used(), 2);
  for (auto& s : g.seqs) EXPECT_EQ(s->block_table, g.seqs[0]->block_table);
  EXPECT_EQ(bm.ref_count(g.seqs[0]->block_table[0]), 3);
  g.prefilled(7);
  bm.check_invariants(g.live());
  bm.release(*g.seqs[1]);
  EXPECT_EQ(bm.ref_count(g.seqs[0]->block_table[1]), 2);
  EXPECT_EQ(bm.num_used(), 2);
  bm.release(*g.seqs[0]);
  bm.release(*g.seqs[2]);
  EXPECT_EQ(bm.num_free(), 10);
  EXPECT_EQ(bm.peak_used(), 2);
  bm.check_invariants({});
}

TEST(BlockManager, CopyOnWriteOfSharedPartialBlock) {
  BlockManager bm(10, 4);
  Group g(10, 3);  // blocks of 4: [0..3] [4..7] [8, 9 | free slots]
  bm.allocate_shared(g.ptrs(), 10);
  g.prefilled(5);  // each now feeds its first token at position 10, inside the shared third block
  const std::vector<int32_t> shared = g.seqs[0]->block_table;
  std::vector<BlockCopy> copies;
  for (auto& s : g.seqs) {
    ASSERT_TRUE(bm.can_append(*s));
    const int32_t slot = bm.append_slot(*s, copies);
    EXPECT_EQ(slot, s->block_table[2] * 4 + 2);
  }
  // The first two copy the two context slots into a private block; the last keeps the original.
  ASSERT_EQ(copies.size(), 2u);
  for (const BlockCopy& c : copies) {
    EXPECT_EQ(c.src, shared[2]);
    EXPECT_EQ(c.num_tokens, 2);
  }
  EXPECT_NE(copies[0].dst, copies[1].dst);
  EXPECT_EQ(g.seqs[2]->block_table[2], shared[2]);
  EXPECT_EQ(bm.ref_count(shared[2]), 1);
  EXPECT_EQ(bm.ref_count(shared[0]), 3);  // full blocks stay shared
  EXPECT_EQ(bm.num_used(), 2 + 3);
  for (auto& s : g.seqs) s->num_cached_tokens = s->num_tokens();
  bm.check_invariants(g.live());
}

TEST(BlockManager, NewBlockAtBoundaryNeedsNoCopy) {
  BlockManager bm(10, 4);
  Group g(8, 2);
  EXPECT_EQ(bm.blocks_to_admit(8, 2), 2 + 2);
  bm.allocate_shared(g.ptrs(), 8);
  g.prefilled(5);
  std::vector<BlockCopy> copies;
  for (auto& s : g.seqs) bm.append_slot(*s, copies);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(g.seqs[0]->block_table.size(), 3u);
  EXPECT_NE(g.seqs[0]->block_table[2], g.seqs[1]->block_table[2]);
  EXPECT_EQ(bm.num_used(), 4);
}

TEST(BlockManager, CanAppendIsFalseOnlyWhenABlockIsNeededAndNoneIsFree) {
  BlockManager bm(3, 4);
  Group g(6, 2);  // 2 shared blocks, the second partial
  bm.allocate_shared(g.ptrs(), 6);
  g.prefilled(5);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.can_append(*g.seqs[0]));
  bm.append_slot(*g.seqs[0], copies);  // takes the last free block for its copy
  EXPECT_EQ(bm.num_free(), 0);
  EXPECT_TRUE(bm.can_append(*g.seqs[1]));  // now sole owner of the original: writes in place
  bm.append_slot(*g.seqs[1], copies);
  // Position 7 then 8: the next block boundary needs a block and none is free.
  for (auto& s : g.seqs) {
    s->num_cached_tokens = s->num_tokens();
    s->append(6, 0.0f);
  }
  EXPECT_TRUE(bm.can_append(*g.seqs[0]));  // position 7, same block
  bm.append_slot(*g.seqs[0], copies);
  g.seqs[0]->num_cached_tokens = g.seqs[0]->num_tokens();
  g.seqs[0]->append(6, 0.0f);
  EXPECT_FALSE(bm.can_append(*g.seqs[0]));  // position 8
  EXPECT_THROW(bm.append_slot(*g.seqs[0], copies), Error);
}

TEST(BlockManager, DoubleFreeIsAnError) {
  BlockManager bm(4, 4);
  Group g(5, 1);
  bm.allocate_shared(g.ptrs(), 5);
  Sequence twin(9, 0, 0, 0, g.prompt);
  twin.block_table = g.seqs[0]->block_table;  // a table copied without taking references
  bm.release(*g.seqs[0]);
  try {
    bm.release(twin);
    FAIL() << "expected a double-free error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  }
}

TEST(BlockManager, InvariantCheckCatchesUntrackedReference) {
  BlockManager bm(6, 4);
  Group g(5, 2);
  bm.allocate_shared(g.ptrs(), 5);
  g.prefilled(3);
  bm.check_invariants(g.live());
  g.seqs[1]->block_table[0] = 5;  // a free block
  EXPECT_THROW(bm.check_invariants(g.live()), Error);
  g.seqs[1]->block_table[0] = g.seqs[0]->block_table[0];
  EXPECT_THROW(bm.check_invariants({g.seqs[0].get()}), Error);  // refcount 2, one table
  bm.check_invariants(g.live());
}

TEST(BlockManager, RejectsBadSizes) {
  EXPECT_THROW(BlockManager(0, 16), Error);
  EXPECT_THROW(BlockManager(4, 0), Error);
  BlockManager bm(2, 4);
  Group g(12, 1);  // needs 3 blocks
  EXPECT_THROW(bm.allocate_shared(g.ptrs(), 12), Error);
  EXPECT_EQ(bm.num_free(), 2);
}

}  // namespace
}  // namespace rlcpp
