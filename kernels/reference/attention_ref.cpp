// Reference causal attention over packed sequences (GQA): softmax(scale q k^T) v per query row and head, and its
// backward from the saved lse; and the same attention against a paged KV cache.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "kernels/cpu/dtype_round.h"
#include "kernels/reference/reference_kernels.h"

namespace rlcpp::ref {
namespace {

float dot(const float* a, const float* b, int64_t d) {
  float s = 0.0f;
  for (int64_t t = 0; t < d; ++t) s += a[t] * b[t];
  return s;
}

// One query head against n_keys keys: out (d) = softmax(scale q.k_j) @ v_j, lse = logsumexp of the scores.
void attend(const float* q, const std::vector<const float*>& keys, const std::vector<const float*>& values,
            int64_t d, float scale, float* out, float* lse) {
  std::vector<float> s(keys.size());
  float m = -INFINITY;
  for (size_t j = 0; j < keys.size(); ++j) {
    s[j] = scale * dot(q, keys[j], d);
    m = std::max(m, s[j]);
  }
  float sum = 0.0f;
  for (float& x : s) sum += (x = std::exp(x - m));
  for (int64_t t = 0; t < d; ++t) {
    float acc = 0.0f;
    for (size_t j = 0; j < keys.size(); ++j) acc += s[j] * values[j][t];
    out[t] = acc / sum;
  }
  if (lse) *lse = m + std::log(sum);
}

}  // namespace

void attention_forward(const float* q, const float* k, const float* v, const int32_t* cu_seqlens, int64_t num_seqs,
                       int64_t hq, int64_t hkv, int64_t d, float scale, float* out, float* lse) {
  const int64_t group = hq / hkv;
  for (int64_t b = 0; b < num_seqs; ++b)
    for (int64_t i = cu_seqlens[b]; i < cu_seqlens[b + 1]; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        std::vector<const float*> keys, values;
        for (int64_t j = cu_seqlens[b]; j <= i; ++j) {
          keys.push_back(k + (j * hkv + h / group) * d);
          values.push_back(v + (j * hkv + h / group) * d);
        }
        attend(q + (i * hq + h) * d, keys, values, d, scale, out + (i * hq + h) * d, lse + i * hq + h);
      }
}

void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t hq, int64_t hkv,
                        int64_t d, float scale, float* dq, float* dk, float* dv) {
  // p_ij = exp(s_ij - lse_i); dS_ij = p_ij (dout_i . v_j - dout_i . out_i);
  // dq_i = scale sum_j dS_ij k_j, dk_j = scale sum_i dS_ij q_i, dv_j = sum_i p_ij dout_i.
  const int64_t n = cu_seqlens[num_seqs], group = hq / hkv;
  for (int64_t t = 0; t < n * hq * d; ++t) dq[t] = 0.0f;
  for (int64_t t = 0; t < n * hkv * d; ++t) dk[t] = dv[t] = 0.0f;
  for (int64_t b = 0; b < num_seqs; ++b)
    for (int64_t i = cu_seqlens[b]; i < cu_seqlens[b + 1]; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const float* qi = q + (i * hq + h) * d;
        const float* gi = dout + (i * hq + h) * d;
        const float delta = dot(gi, out + (i * hq + h) * d, d);
        for (int64_t j = cu_seqlens[b]; j <= i; ++j) {
          const int64_t kv = (j * hkv + h / group) * d;
          const float p = std::exp(scale * dot(qi, k + kv, d) - lse[i * hq + h]);
          const float ds = p * (dot(gi, v + kv, d) - delta);
          for (int64_t t = 0; t < d; ++t) {
            dq[(i * hq + h) * d + t] += scale * ds * k[kv + t];
            dk[kv + t] += scale * ds * qi[t];
            dv[kv + t] += p * gi[t];
          }
        }
      }
}

namespace {

float cache_value(const void* cache, DType dtype, int64_t index) {
  if (dtype == DType::kBF16) return cpu::bf16_value(static_cast<const uint16_t*>(cache)[index]);
  if (dtype == DType::kF16) return cpu::f16_value_reference(static_cast<const uint16_t*>(cache)[index]);
  return static_cast<const float*>(cache)[index];
}

}  // namespace

void paged_kv_write(const float* k, const float* v, const int32_t* slot_mapping, int64_t n, int64_t row,
                    void* k_cache, void* v_cache, DType cache_dtype) {
  for (int64_t i = 0; i < n; ++i) {
    if (slot_mapping[i] < 0) continue;
    const int64_t base = static_cast<int64_t>(slot_mapping[i]) * row;
    for (int64_t t = 0; t < row; ++t) {
      if (cache_dtype == DType::kF32) {
        static_cast<float*>(k_cache)[base + t] = k[i * row + t];
        static_cast<float*>(v_cache)[base + t] = v[i * row + t];
      } else {
        auto bits = [&](float x) {
          return cache_dtype == DType::kBF16 ? static_cast<uint16_t>(std::bit_cast<uint32_t>(
                                                   cpu::bf16_round_reference(x)) >> 16)
                                             : cpu::f16_bits_reference(x);
        };
        static_cast<uint16_t*>(k_cache)[base + t] = bits(k[i * row + t]);
        static_cast<uint16_t*>(v_cache)[base + t] = bits(v[i * row + t]);
      }
    }
  }
}

void paged_attention(const float* q, const void* k_cache, const void* v_cache, DType cache_dtype,
                     const int32_t* query_seq, const int32_t* query_pos, const int32_t* block_indptr,
                     const int32_t* block_indices, int64_t block_size, int64_t n, int64_t hq, int64_t hkv, int64_t d,
                     float scale, float* out) {
  const int64_t group = hq / hkv, row = hkv * d;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t* blocks = block_indices + block_indptr[query_seq[i]];
    const int64_t n_keys = static_cast<int64_t>(query_pos[i]) + 1;
    // Positions 0..pos of the sequence, converted from the cache into rows of (hkv, d).
    std::vector<float> keys(n_keys * row), values(n_keys * row);
    for (int64_t j = 0; j < n_keys; ++j) {
      const int64_t slot = static_cast<int64_t>(blocks[j / block_size]) * block_size + j % block_size;
      for (int64_t t = 0; t < row; ++t) {
        keys[j * row + t] = cache_value(k_cache, cache_dtype, slot * row + t);
        values[j * row + t] = cache_value(v_cache, cache_dtype, slot * row + t);
      }
    }
    for (int64_t h = 0; h < hq; ++h) {
      std::vector<const float*> k_rows, v_rows;
      for (int64_t j = 0; j < n_keys; ++j) {
        k_rows.push_back(keys.data() + j * row + (h / group) * d);
        v_rows.push_back(values.data() + j * row + (h / group) * d);
      }
      attend(q + (i * hq + h) * d, k_rows, v_rows, d, scale, out + (i * hq + h) * d, nullptr);
    }
  }
}

}  // namespace rlcpp::ref
