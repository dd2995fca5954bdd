// Token embedding lookup and its scatter-add backward on the CPU.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {

void embedding_forward(const void* table, DType dtype, const int32_t* ids, float* out, int64_t n, int64_t c) {
  const size_t row_bytes = static_cast<size_t>(c) * dtype_size(dtype);
#pragma omp parallel for if (n * c > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const void* row = static_cast<const char*>(table) + static_cast<size_t>(ids[i]) * row_bytes;
    if (dtype == DType::kF32)
      std::memcpy(out + i * c, row, row_bytes);
    else
      convert(row, dtype, out + i * c, DType::kF32, c);  // widened exactly
  }
}

void embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t c) {
  // Rows are added in index order within each column block, so the sum order is fixed.
  const int64_t block_width = column_block_width(c);
  const int64_t blocks = (c + block_width - 1) / block_width;
#pragma omp parallel for if (n * c > kParallelMinWork)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * block_width;
    const int64_t width = std::min(block_width, c - c0);
    for (int64_t i = 0; i < n; ++i) {
      float* dst = dtable + static_cast<int64_t>(ids[i]) * c + c0;
      const float* src = dout + i * c + c0;
      for (int64_t j = 0; j < width; ++j) dst[j] += src[j];
    }
  }
}

}  // namespace rlcpp::cpu
