// The row chunks a training forward and backward run their layers in on the CPU: whole sequences of a packed
// batch, about `target_rows` rows each, so that a chunk's activations and their gradients stay in the core's
// L2 cache from one op of a layer to the next, and the threads each take a share of the chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace rlcpp {

// Rows per chunk of the CPU training passes. Through one layer's backward a W1 row touches ~16 KB (kept
// activations, recomputed ones, their gradients), so 128 rows stay near a 2 MB L2, not all of it live at once;
// 128 and 64 measured the same and 256 no better (bench/RESULTS.md), and 128 rows keep the weight-gradient
// products (K = the chunk's rows) long enough to run at the tile's rate.
constexpr int64_t kChunkRows = 128;

// Rows [begin, end) of a packed batch, whole sequences; cu_seqlens (int32) counts from the chunk's first row.
struct RowChunk {
  int64_t begin = 0, end = 0;
  Tensor cu_seqlens;
};

// Consecutive sequences (cu_seqlens of the whole batch) gathered into chunks of at least `target_rows` rows
// (the last may be shorter; a longer sequence is a chunk of its own). No rows give no chunks.
std::vector<RowChunk> plan_row_chunks(const std::vector<int32_t>& cu_seqlens, int64_t target_rows);

}  // namespace rlcpp
