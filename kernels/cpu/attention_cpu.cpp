// Training attention on the CPU: causal, packed sequences (cu_seqlens), GQA. The forward runs the shared
// per-query routine (attention_query.h); the backward recomputes probabilities from the saved lse.
#include <algorithm>
#include <vector>

#include "kernels/cpu/attention_query.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec_math.h"

namespace rlcpp::cpu {
namespace {

// Positions 0.. of one packed sequence: contiguous rows of k and v starting at the sequence's first row.
struct ContiguousKvRows {
  const float* k;
  const float* v;
  int64_t row_stride;  // hkv * d
  const float* key_row(int64_t j) const { return k + j * row_stride; }
  const float* value_row(int64_t j) const { return v + j * row_stride; }
};

// Multiply-adds of a causal pass over all sequences, to decide whether threads pay.
int64_t causal_work(const int32_t* cu_seqlens, int64_t num_seqs, int64_t hq, int64_t d) {
  int64_t work = 0;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t len = cu_seqlens[b + 1] - cu_seqlens[b];
    work += len * (len + 1) / 2 * hq * d;
  }
  return work;
}

int64_t max_seqlen(const int32_t* cu_seqlens, int64_t num_seqs) {
  int64_t longest = 1;
  for (int64_t b = 0; b < num_seqs; ++b) longest = std::max<int64_t>(longest, cu_seqlens[b + 1] - cu_seqlens[b]);
  return longest;
}

}  // namespace

void attention_forward(const float* q, const float* k, const float* v, const int32_t* cu_seqlens,
                       int64_t num_seqs, int64_t hq, int64_t hkv, int64_t d, float scale, float* out, float* lse) {
  const int64_t n = cu_seqlens[num_seqs];
  const int64_t kv_stride = hkv * d;
  std::vector<int32_t> seq_start(static_cast<size_t>(n));
  for (int64_t b = 0; b < num_seqs; ++b)
    for (int32_t i = cu_seqlens[b]; i < cu_seqlens[b + 1]; ++i) seq_start[static_cast<size_t>(i)] = cu_seqlens[b];
  const int64_t max_keys = max_seqlen(cu_seqlens, num_seqs);
#pragma omp parallel if (causal_work(cu_seqlens, num_seqs, hq, d) > kParallelMinWork)
  {
    AttendScratch scratch(max_keys);
    // Later rows of a sequence attend to more keys; dynamic scheduling evens that out (the result per row is
    // the same whichever thread computes it).
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t start = seq_start[static_cast<size_t>(i)];
      const ContiguousKvRows rows{k + start * kv_stride, v + start * kv_stride, kv_stride};
      attend_query_row(q + i * hq * d, rows, i - start + 1, hq, hkv, d, scale, scratch, out + i * hq * d,
                       lse + i * hq);
    }
  }
}

void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, const int32_t* cu_seqlens, int64_t num_seqs, int64_t hq, int64_t hkv,
                        int64_t d, float scale, float* dq, float* dk, float* dv) {
  // Per query row i and key j <= i (flash-attention backward with P recomputed from lse):
  //   p_ij = exp(scale q_i.k_j - lse_i), D_i = dO_i . O_i, dS_ij = p_ij (dO_i . v_j - D_i),
  //   dQ_i = scale sum_j dS_ij k_j, dK_j = scale sum_i dS_ij q_i, dV_j = sum_i p_ij dO_i.
  // One task per (sequence, kv head) owns that head's dk/dv rows of the sequence and the dq rows of its query
  // heads, so no two threads write the same memory and each sum runs in a fixed order.
  const int64_t group = hq / hkv;
  const int64_t tasks = num_seqs * hkv;
#pragma omp parallel if (3 * causal_work(cu_seqlens, num_seqs, hq, d) > kParallelMinWork)
  {
    std::vector<float> dq_acc(static_cast<size_t>(d));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / hkv;
      const int64_t g = task % hkv;
      const int64_t start = cu_seqlens[b];
      const int64_t len = cu_seqlens[b + 1] - start;
      for (int64_t j = 0; j < len; ++j) {
        std::fill_n(dk + ((start + j) * hkv + g) * d, d, 0.0f);
        std::fill_n(dv + ((start + j) * hkv + g) * d, d, 0.0f);
      }
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i = 0; i < len; ++i) {
          const int64_t qi_off = ((start + i) * hq + h) * d;
          const float* qi = q + qi_off;
          const float* doi = dout + qi_off;
          const float lse_i = lse[(start + i) * hq + h];
          const float d_i = dot_fixed_order(doi, out + qi_off, d);
          std::fill(dq_acc.begin(), dq_acc.end(), 0.0f);
          for (int64_t j = 0; j <= i; ++j) {
            const int64_t kv_off = ((start + j) * hkv + g) * d;
            const float* kj = k + kv_off;
            const float* vj = v + kv_off;
            float* dkj = dk + kv_off;
            float* dvj = dv + kv_off;
            const float p = exp_fixed(dot_fixed_order(qi, kj, d) * scale - lse_i);
            const float ds = p * (dot_fixed_order(doi, vj, d) - d_i);
            const float ds_scaled = scale * ds;
            for (int64_t c = 0; c < d; ++c) {
              dq_acc[static_cast<size_t>(c)] += ds * kj[c];
              dkj[c] += ds_scaled * qi[c];
              dvj[c] += p * doi[c];
            }
          }
          float* dqi = dq + qi_off;
          for (int64_t c = 0; c < d; ++c) dqi[c] = scale * dq_acc[static_cast<size_t>(c)];
        }
      }
    }
  }
}

}  // namespace rlcpp::cpu
