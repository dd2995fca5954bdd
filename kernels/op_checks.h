// Argument checks shared by the ops of ops.h: shapes, ranks, and the contents of index tensors (ids, cu_seqlens,
// block tables, targets). Every failure throws rlcpp::Error naming the op, the argument and the bad value.
// Internal to kernels/: index checks read host memory, so ops.cpp runs them on the CPU path only.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rlcpp::ops {

// A tensor argument and the name the op's documentation gives it, for error messages.
struct Arg {
  const char* name;
  const Tensor* t;
};

void expect_shape(const char* op, Arg a, const Shape& expected);
// layout names the axes for the message, e.g. "(N,Hq,D)".
void expect_rank(const char* op, Arg a, int64_t rank, const char* layout);
// Every value of an I32 tensor in [lo, hi).
void expect_indices_in(const char* op, Arg a, int64_t lo, int64_t hi);
// cu_seqlens (B+1) I32: starts at 0, never decreases, ends at n.
void expect_cu_seqlens(const char* op, const Tensor& cu_seqlens, int64_t n);
// Targets (N) I32: a vocabulary id in [0, vocab) or -1 (no target); a bad one names its row.
void expect_targets(const char* op, const Tensor& targets, int64_t vocab);
// paged_attention's index tensors: each query row names a sequence of the CSR block table and a position inside
// the blocks that sequence owns, and every block those positions use is one of the cache's num_blocks.
void expect_paged_rows(const char* op, const Tensor& query_seq, const Tensor& query_pos, const Tensor& block_indptr,
                       const Tensor& block_indices, int64_t block_size, int64_t num_blocks);

// q (N,Hq,D), k and v (N,Hkv,D) with Hq a multiple of Hkv.
struct AttentionDims {
  int64_t n, hq, hkv, d;
};
AttentionDims attention_dims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace rlcpp::ops
