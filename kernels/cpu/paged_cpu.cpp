// Paged KV cache on the CPU: scatter new k/v rows into slots, and attention of query rows against the cache
// through the shared per-query routine (attention_query.h), so results match attention_forward bit for bit.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "core/parallel_errors.h"
#include "kernels/cpu/attention_query.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dtype_round.h"

namespace rlcpp::cpu {
namespace {

// Calls at(j, row) for positions j = 0..n-1 of a sequence whose blocks are `blocks`: `row` is the offset of
// position j's (hkv,d) row in the cache, slot blocks[j / block_size] * block_size + j % block_size.
template <class At>
void walk_slots(const int32_t* blocks, int64_t block_size, int64_t slot_stride, int64_t n, const At& at) {
  for (int64_t b = 0, j0 = 0; j0 < n; ++b, j0 += block_size) {
    const int64_t first = static_cast<int64_t>(blocks[b]) * block_size * slot_stride;
    const int64_t count = std::min(block_size, n - j0);
    for (int64_t t = 0; t < count; ++t) at(j0 + t, first + t * slot_stride);
  }
}

// Positions 0.. of one sequence in the cache: position j is in slot blocks[j / block_size] * block_size +
// j % block_size, each slot a (hkv,d) row.
struct PagedKvRows {
  const float* k_cache;
  const float* v_cache;
  const int32_t* blocks;
  int64_t block_size;
  int64_t slot_stride;  // hkv * d
  void gather(int64_t n, const float** k_rows, const float** v_rows) const {
    walk_slots(blocks, block_size, slot_stride, n, [&](int64_t j, int64_t row) {
      k_rows[j] = k_cache + row;
      v_rows[j] = v_cache + row;
    });
  }
};

// The same positions in a 16-bit cache (BF16 or F16 bits): gather converts each row to fp32 (exactly) into the
// thread's buffer and points there, so the attention routine reads the very floats a fp32 cache holding the
// rounded values would give it.
template <float (*kToFloat)(uint16_t)>
struct PagedKvRows16 {
  const uint16_t* k_cache;
  const uint16_t* v_cache;
  const int32_t* blocks;
  int64_t block_size;
  int64_t slot_stride;  // hkv * d
  float* k_buf;          // (max_keys, slot_stride) each
  float* v_buf;
  void gather(int64_t n, const float** k_rows, const float** v_rows) const {
    walk_slots(blocks, block_size, slot_stride, n, [&](int64_t j, int64_t row) {
      float* kd = k_buf + j * slot_stride;
      float* vd = v_buf + j * slot_stride;
      for (int64_t c = 0; c < slot_stride; ++c) {
        kd[c] = kToFloat(k_cache[row + c]);
        vd[c] = kToFloat(v_cache[row + c]);
      }
      k_rows[j] = kd;
      v_rows[j] = vd;
    });
  }
};

template <uint16_t (*kToBits)(float)>
void write_rows16(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                  uint16_t* k_cache, uint16_t* v_cache) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slot_mapping[i];
    if (slot < 0) continue;
    for (int64_t c = 0; c < row; ++c) {
      k_cache[slot * row + c] = kToBits(k[i * row + c]);
      v_cache[slot * row + c] = kToBits(v[i * row + c]);
    }
  }
}

// Query rows against the cache through `make_rows(thread buffers, sequence)`, which builds each row's accessor.
template <class MakeRows>
void attend_rows(const float* q, const int32_t* query_seq, const int32_t* query_pos, int64_t n, int64_t hq,
                 int64_t hkv, int64_t d, float scale, float* out, bool converts, const MakeRows& make_rows) {
  int64_t max_keys = 1;
  int64_t work = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_keys = std::max<int64_t>(max_keys, query_pos[i] + 1);
    work += (query_pos[i] + 1) * hq * d;
  }
  // A thread whose scratch allocation fails skips its rows; the error is rethrown after the region.
  ParallelErrors errors(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel if (work > kParallelMinWork)
  {
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    std::optional<AttendScratch> scratch;
    std::vector<float> k_buf, v_buf;
    errors.run(thread, [&] {
      scratch.emplace(max_keys, hq / hkv);
      k_buf.resize(converts ? static_cast<size_t>(max_keys * hkv * d) : 0);
      v_buf.resize(k_buf.size());
    });
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < n; ++i) {
      if (errors.failed(thread)) continue;
      const auto rows = make_rows(k_buf.data(), v_buf.data(), query_seq[i]);
      attend_query_row(q + i * hq * d, rows, query_pos[i] + 1, hq, hkv, d, scale, *scratch, out + i * hq * d,
                       nullptr);
    }
  }
  errors.rethrow_first();
}

}  // namespace

void paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                    void* k_cache, void* v_cache, DType cache_dtype) {
  if (cache_dtype == DType::kBF16) {
    write_rows16<bf16_bits>(k, v, slot_mapping, n, row, static_cast<uint16_t*>(k_cache),
                            static_cast<uint16_t*>(v_cache));
    return;
  }
  if (cache_dtype == DType::kF16) {
    write_rows16<f16_bits>(k, v, slot_mapping, n, row, static_cast<uint16_t*>(k_cache),
                           static_cast<uint16_t*>(v_cache));
    return;
  }
  const size_t bytes = static_cast<size_t>(row) * sizeof(float);
  float* kc = static_cast<float*>(k_cache);
  float* vc = static_cast<float*>(v_cache);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slot_mapping[i];
    if (slot < 0) continue;
    std::memcpy(kc + slot * row, k + i * row, bytes);
    std::memcpy(vc + slot * row, v + i * row, bytes);
  }
}

void paged_attention(const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
                     const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
                     const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d,
                     float scale, float* out) {
  const int64_t slot_stride = hkv * d;
  auto blocks_of = [&](int32_t b) { return block_indices + block_indptr[b]; };
  if (cache_dtype == DType::kF32) {
    const float* kc = static_cast<const float*>(k_cache);
    const float* vc = static_cast<const float*>(v_cache);
    attend_rows(q, query_seq, query_pos, n, hq, hkv, d, scale, out, false, [&](float*, float*, int32_t b) {
      return PagedKvRows{kc, vc, blocks_of(b), block_size, slot_stride};
    });
    return;
  }
  const uint16_t* kc = static_cast<const uint16_t*>(k_cache);
  const uint16_t* vc = static_cast<const uint16_t*>(v_cache);
  if (cache_dtype == DType::kBF16) {
    attend_rows(q, query_seq, query_pos, n, hq, hkv, d, scale, out, true, [&](float* kb, float* vb, int32_t b) {
      return PagedKvRows16<bf16_value>{kc, vc, blocks_of(b), block_size, slot_stride, kb, vb};
    });
  } else {
    attend_rows(q, query_seq, query_pos, n, hq, hkv, d, scale, out, true, [&](float* kb, float* vb, int32_t b) {
      return PagedKvRows16<f16_value>{kc, vc, blocks_of(b), block_size, slot_stride, kb, vb};
    });
  }
}

}  // namespace rlcpp::cpu
