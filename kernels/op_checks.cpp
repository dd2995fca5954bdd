#include "kernels/op_checks.h"

#include <vector>

#include "core/error.h"

namespace rlcpp::ops {

void expect_shape(const char* op, Arg a, const Shape& expected) {
  RLCPP_CHECK(a.t->shape() == expected, op << ": " << a.name << " has shape " << shape_str(a.t->shape())
                                           << " but expected " << shape_str(expected));
}

// layout names the axes for the message, e.g. "(N,Hq,D)".
void expect_rank(const char* op, Arg a, int64_t rank, const char* layout) {
  RLCPP_CHECK(a.t->dim() == rank, op << ": " << a.name << " must be " << rank << "-D " << layout << ", got shape "
                                     << shape_str(a.t->shape()));
}

// Every value of an I32 tensor in [lo, hi); the message names the op, the tensor and the index.
void expect_indices_in(const char* op, Arg a, int64_t lo, int64_t hi) {
  const int32_t* p = a.t->data<int32_t>();
  for (int64_t i = 0; i < a.t->numel(); ++i)
    RLCPP_CHECK(p[i] >= lo && p[i] < hi, op << ": " << a.name << "[" << i << "] = " << p[i] << " is outside ["
                                            << lo << ", " << hi << ")");
}

// cu_seqlens (B+1): starts at 0, never decreases, ends at n.
void expect_cu_seqlens(const char* op, const Tensor& cu, int64_t n) {
  expect_rank(op, {"cu_seqlens", &cu}, 1, "(B+1)");
  RLCPP_CHECK(cu.numel() >= 1, op << ": cu_seqlens is empty; it needs B+1 entries");
  const int32_t* p = cu.data<int32_t>();
  const int64_t b = cu.numel() - 1;
  RLCPP_CHECK(p[0] == 0, op << ": cu_seqlens[0] = " << p[0] << ", expected 0");
  for (int64_t i = 0; i < b; ++i)
    RLCPP_CHECK(p[i + 1] >= p[i], op << ": cu_seqlens decreases at " << i + 1 << " (" << p[i] << " then "
                                     << p[i + 1] << ")");
  RLCPP_CHECK(p[b] == n, op << ": cu_seqlens ends at " << p[b] << " but there are " << n << " rows");
}

AttentionDims attention_dims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  expect_rank(op, {"q", &q}, 3, "(N,Hq,D)");
  expect_rank(op, {"k", &k}, 3, "(N,Hkv,D)");
  const AttentionDims dims{q.size(0), q.size(1), k.size(1), q.size(2)};
  expect_shape(op, {"k", &k}, {dims.n, dims.hkv, dims.d});
  expect_shape(op, {"v", &v}, {dims.n, dims.hkv, dims.d});
  RLCPP_CHECK(dims.hkv > 0 && dims.hq % dims.hkv == 0,
              op << ": query heads " << dims.hq << " are not a multiple of kv heads " << dims.hkv);
  return dims;
}

// Targets are a vocabulary id or -1 (no target); anything else names its row.
void expect_targets(const char* op, const Tensor& targets, int64_t vocab) {
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i)
    RLCPP_CHECK(t[i] == -1 || (t[i] >= 0 && t[i] < vocab), op << ": target " << t[i] << " at row " << i
                                                               << " is outside [0, " << vocab << ") and not -1");
}

// Every query row names a sequence of the block table and a position inside the blocks that sequence owns,
// and every block those positions use is a block of the cache. Errors name the row.
void expect_paged_rows(const char* op, const Tensor& query_seq, const Tensor& query_pos, const Tensor& block_indptr,
                       const Tensor& block_indices, int64_t block_size, int64_t num_blocks) {
  const int32_t* seq = query_seq.data<int32_t>();
  const int32_t* pos = query_pos.data<int32_t>();
  const int32_t* indptr = block_indptr.data<int32_t>();
  const int32_t* blocks = block_indices.data<int32_t>();
  const int64_t num_seqs = block_indptr.numel() - 1;
  for (int64_t b = 0; b < num_seqs; ++b)
    RLCPP_CHECK(indptr[b] >= 0 && indptr[b] <= indptr[b + 1] && indptr[b + 1] <= block_indices.numel(),
                op << ": block_indptr[" << b << ".." << b + 1 << "] = [" << indptr[b] << ", " << indptr[b + 1]
                   << ") is not a range of the " << block_indices.numel() << " block_indices");
  // The furthest block each sequence's rows reach, and a row that reaches it (for the message).
  std::vector<int64_t> blocks_used(static_cast<size_t>(num_seqs), 0);
  std::vector<int64_t> row_using(static_cast<size_t>(num_seqs), -1);
  for (int64_t i = 0; i < query_seq.numel(); ++i) {
    const int64_t b = seq[i];
    RLCPP_CHECK(b >= 0 && b < num_seqs, op << ": query row " << i << " names sequence " << b << " but the block "
                                           << "table has " << num_seqs << " sequences");
    const int64_t owned = indptr[b + 1] - indptr[b];
    RLCPP_CHECK(pos[i] >= 0 && pos[i] < owned * block_size,
                op << ": query row " << i << " (sequence " << b << ") is at position " << pos[i]
                   << " but the sequence owns " << owned << " blocks of " << block_size << " slots");
    const int64_t need = pos[i] / block_size + 1;
    if (need > blocks_used[static_cast<size_t>(b)]) {
      blocks_used[static_cast<size_t>(b)] = need;
      row_using[static_cast<size_t>(b)] = i;
    }
  }
  for (int64_t b = 0; b < num_seqs; ++b) {
    for (int64_t j = 0; j < blocks_used[static_cast<size_t>(b)]; ++j) {
      const int64_t block = blocks[indptr[b] + j];
      RLCPP_CHECK(block >= 0 && block < num_blocks,
                  op << ": query row " << row_using[static_cast<size_t>(b)] << " (sequence " << b << ") uses block "
                     << block << " (block_indices[" << indptr[b] + j << "]) but the cache has " << num_blocks
                     << " blocks");
    }
  }
}

}  // namespace rlcpp::ops
