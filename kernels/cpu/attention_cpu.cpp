// Training attention on the CPU: causal, packed sequences (cu_seqlens), GQA. The forward runs the shared
// per-query routine (attention_query.h); the backward recomputes probabilities from the saved lse.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/parallel_errors.h"
#include "kernels/cpu/attention_query.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/lanes8.h"
#include "kernels/cpu/vec_math.h"


namespace rlcpp::cpu {
namespace {

// Positions 0.. of one packed sequence: contiguous rows of k and v starting at the sequence's first row.
struct ContiguousKvRows {
  const float* k;
  const float* v;
  int64_t row_stride;  // hkv * d
  void gather(int64_t n, const float** k_rows, const float** v_rows) const {
    for (int64_t j = 0; j < n; ++j) {
      k_rows[j] = k + j * row_stride;
      v_rows[j] = v + j * row_stride;
    }
  }
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

// Columns [c, c + L::kWidth) of one query row's backward: dQ_i = scale sum_j dS_ij k_j (kept in a register),
// dK_j += scale dS_ij q_i and dV_j += p_ij dO_i for its n_keys keys (rows kv_stride apart).
template <class L>
inline void query_row_columns(int64_t c, const float* qi, const float* doi, const float* kg, float* dkg, float* dvg,
                              int64_t kv_stride, const float* ds, const float* p, int64_t n_keys, float scale,
                              float* dq_row) {
  using V = typename L::V;
  const V qc = L::load(qi + c), doc = L::load(doi + c);
  V dq_acc = L::zero();
  for (int64_t j = 0; j < n_keys; ++j) {
    const V dsj = L::set1(ds[j]);
    dq_acc = L::fma(dsj, L::load(kg + j * kv_stride + c), dq_acc);
    float* dkj = dkg + j * kv_stride + c;
    float* dvj = dvg + j * kv_stride + c;
    L::store(dkj, L::fma(L::mul(L::set1(scale), dsj), qc, L::load(dkj)));
    L::store(dvj, L::fma(L::set1(p[j]), doc, L::load(dvj)));
  }
  L::store(dq_row + c, L::mul(L::set1(scale), dq_acc));
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
  // A thread whose scratch allocation fails skips its rows; the error is rethrown after the region.
  ParallelErrors errors(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel if (causal_work(cu_seqlens, num_seqs, hq, d) > kParallelMinWork)
  {
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    std::optional<AttendScratch> scratch;
    errors.run(thread, [&] { scratch.emplace(max_keys, hq / hkv); });
    // Later rows of a sequence attend to more keys; dynamic scheduling evens that out (the result per row is
    // the same whichever thread computes it).
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < n; ++i) {
      if (errors.failed(thread)) continue;
      const int64_t start = seq_start[static_cast<size_t>(i)];
      const ContiguousKvRows rows{k + start * kv_stride, v + start * kv_stride, kv_stride};
      attend_query_row(q + i * hq * d, rows, i - start + 1, hq, hkv, d, scale, *scratch, out + i * hq * d,
                       lse + i * hq);
    }
  }
  errors.rethrow_first();
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
  const int64_t kv_stride = hkv * d;
  const int64_t max_keys = max_seqlen(cu_seqlens, num_seqs);
  // A thread whose scratch allocation fails skips its tasks; the error is rethrown after the region.
  ParallelErrors errors(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel if (3 * causal_work(cu_seqlens, num_seqs, hq, d) > kParallelMinWork)
  {
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    // Per query row: scaled dS and P over its keys (padded to blocks of eight), and the key/value row pointers.
    std::vector<float> ds_row, p_row;
    std::vector<const float*> k_rows, v_rows;
    errors.run(thread, [&] {
      const size_t keys = static_cast<size_t>(padded_keys(max_keys));
      ds_row.resize(keys);
      p_row.resize(keys);
      k_rows.resize(keys);
      v_rows.resize(keys);
    });
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      if (errors.failed(thread)) continue;
      const int64_t b = task / hkv;
      const int64_t g = task % hkv;
      const int64_t start = cu_seqlens[b];
      const int64_t len = cu_seqlens[b + 1] - start;
      const float* kg = k + start * kv_stride + g * d;
      const float* vg = v + start * kv_stride + g * d;
      float* dkg = dk + start * kv_stride + g * d;
      float* dvg = dv + start * kv_stride + g * d;
      for (int64_t j = 0; j < len; ++j) {
        std::fill_n(dkg + j * kv_stride, d, 0.0f);
        std::fill_n(dvg + j * kv_stride, d, 0.0f);
      }
      for (int64_t j = 0; j < padded_keys(len); ++j) {
        k_rows[static_cast<size_t>(j)] = kg + (j < len ? j : 0) * kv_stride;
        v_rows[static_cast<size_t>(j)] = vg + (j < len ? j : 0) * kv_stride;
      }
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i = 0; i < len; ++i) {
          const int64_t qi_off = ((start + i) * hq + h) * d;
          const float* qi = q + qi_off;
          const float* doi = dout + qi_off;
          const float lse_i = lse[(start + i) * hq + h];
          const float d_i = dot_fixed_order(doi, out + qi_off, d);
          const int64_t n_keys = i + 1, n_pad = padded_keys(n_keys);
          float* p = p_row.data();
          float* ds = ds_row.data();
          for (int64_t jb = 0; jb < n_pad; jb += kKeyBlock) {
            dot8(qi, k_rows.data() + jb, d, p + jb);
            dot8(doi, v_rows.data() + jb, d, ds + jb);
          }
          for (int64_t j = 0; j < n_pad; ++j) {
            const float pj = exp_fixed(p[j] * scale - lse_i);
            ds[j] = pj * (ds[j] - d_i);
            p[j] = pj;
          }
          // dQ_i = scale sum_j dS_ij k_j in registers; dK_j += scale dS_ij q_i and dV_j += p_ij dO_i in place.
          // Sixteen columns per vector where AVX-512 allows, then eight, then one: every element gets the same
          // operations whichever width computes it.
          int64_t c = 0;
#if defined(__AVX512F__)
          for (; c + Lanes16::kWidth <= d; c += Lanes16::kWidth)
            query_row_columns<Lanes16>(c, qi, doi, kg, dkg, dvg, kv_stride, ds, p, n_keys, scale, dq + qi_off);
#endif
          for (; c + Lanes8::kWidth <= d; c += Lanes8::kWidth)
            query_row_columns<Lanes8>(c, qi, doi, kg, dkg, dvg, kv_stride, ds, p, n_keys, scale, dq + qi_off);
          for (; c < d; ++c) {
            float dq_acc = 0.0f;
            for (int64_t j = 0; j < n_keys; ++j) {
              dq_acc = std::fma(ds[j], kg[j * kv_stride + c], dq_acc);
              dkg[j * kv_stride + c] = std::fma(scale * ds[j], qi[c], dkg[j * kv_stride + c]);
              dvg[j * kv_stride + c] = std::fma(p[j], doi[c], dvg[j * kv_stride + c]);
            }
            dq[qi_off + c] = scale * dq_acc;
          }
        }
      }
    }
  }
  errors.rethrow_first();
}

}  // namespace rlcpp::cpu
