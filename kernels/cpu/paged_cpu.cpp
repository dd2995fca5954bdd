// Paged KV cache on the CPU: scatter new k/v rows into slots, and attention of query rows against the cache
// through the shared per-query routine (attention_query.h), so results match attention_forward bit for bit.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/attention_query.h"
#include "kernels/cpu/cpu_kernels.h"

namespace rlcpp::cpu {
namespace {

// Positions 0.. of one sequence in the cache: position j is in slot blocks[j / block_size] * block_size +
// j % block_size, each slot a (hkv,d) row.
struct PagedKvRows {
  const float* k_cache;
  const float* v_cache;
  const int32_t* blocks;
  int64_t block_size;
  int64_t slot_stride;  // hkv * d
  void gather(int64_t n, const float** k_rows, const float** v_rows) const {
    for (int64_t b = 0, j0 = 0; j0 < n; ++b, j0 += block_size) {
      const int64_t first = static_cast<int64_t>(blocks[b]) * block_size * slot_stride;
      const int64_t count = std::min(block_size, n - j0);
      for (int64_t t = 0; t < count; ++t) {
        k_rows[j0 + t] = k_cache + first + t * slot_stride;
        v_rows[j0 + t] = v_cache + first + t * slot_stride;
      }
    }
  }
};

}  // namespace

void paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                    float* k_cache, float* v_cache) {
  const size_t bytes = static_cast<size_t>(row) * sizeof(float);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slot_mapping[i];
    if (slot < 0) continue;
    std::memcpy(k_cache + slot * row, k + i * row, bytes);
    std::memcpy(v_cache + slot * row, v + i * row, bytes);
  }
}

void paged_attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* query_seq,
                     const int32_t* query_pos, const int32_t* block_indptr, const int32_t* block_indices,
                     int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d, float scale, float* out) {
  int64_t max_keys = 1;
  int64_t work = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_keys = std::max<int64_t>(max_keys, query_pos[i] + 1);
    work += (query_pos[i] + 1) * hq * d;
  }
  const int64_t slot_stride = hkv * d;
#pragma omp parallel if (work > kParallelMinWork)
  {
    AttendScratch scratch(max_keys, hq / hkv);
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < n; ++i) {
      const int32_t b = query_seq[i];
      const PagedKvRows rows{k_cache, v_cache, block_indices + block_indptr[b], block_size, slot_stride};
      attend_query_row(q + i * hq * d, rows, query_pos[i] + 1, hq, hkv, d, scale, scratch, out + i * hq * d,
                       nullptr);
    }
  }
}

}  // namespace rlcpp::cpu
