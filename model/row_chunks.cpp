#include "model/row_chunks.h"

#include "core/error.h"

namespace rlcpp {

std::vector<RowChunk> plan_row_chunks(const std::vector<int32_t>& cu_seqlens, int64_t target_rows) {
  RLCPP_CHECK(target_rows > 0, "plan_row_chunks: target_rows must be positive, got " << target_rows);
  std::vector<RowChunk> chunks;
  size_t first = 0;  // the chunk's first sequence
  for (size_t b = 0; b + 1 < cu_seqlens.size(); ++b) {
    const bool last = b + 2 == cu_seqlens.size();
    if (cu_seqlens[b + 1] - cu_seqlens[first] < target_rows && !last) continue;
    RowChunk c;
    c.begin = cu_seqlens[first];
    c.end = cu_seqlens[b + 1];
    if (c.end > c.begin) {
      c.cu_seqlens = Tensor::empty({static_cast<int64_t>(b + 2 - first)}, DType::kI32);
      for (size_t s = first; s <= b + 1; ++s)
        c.cu_seqlens.data<int32_t>()[s - first] = static_cast<int32_t>(cu_seqlens[s] - c.begin);
      chunks.push_back(std::move(c));
    }
    first = b + 1;
  }
  return chunks;
}

}  // namespace rlcpp
