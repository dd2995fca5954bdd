#include "kernels/cpu/attention_query.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/lanes8.h"

#include "kernels/cpu/vec_math.h"

namespace rlcpp::cpu {
namespace {

// For kHeads heads r: out_r[c0 .. c0 + W kChunks) = inv_sum[r] * sum_j p_r[j] v_j[...] (W = L::kWidth), summed in
// increasing j, one vector per (head, chunk). Two heads share each V load and give the FMA unit independent
// chains; a head's values do not depend on which heads it is processed with, nor on the vector width.
template <class L, int kHeads, int kChunks>
inline void weighted_rows(const float* const* p, const float* const* v_rows, int64_t offset, int64_t n_keys,
                          const float* inv_sum, float* const* out) {
  using V = typename L::V;
  V acc[kHeads][kChunks];
  for (int r = 0; r < kHeads; ++r)
    for (int cc = 0; cc < kChunks; ++cc) acc[r][cc] = L::zero();
  for (int64_t j = 0; j < n_keys; ++j) {
    const float* v = v_rows[j] + offset;
    V vc[kChunks];
    for (int cc = 0; cc < kChunks; ++cc) vc[cc] = L::load(v + L::kWidth * cc);
    for (int r = 0; r < kHeads; ++r) {
      const V pj = L::set1(p[r][j]);
      for (int cc = 0; cc < kChunks; ++cc) acc[r][cc] = L::fma(pj, vc[cc], acc[r][cc]);
    }
  }
  for (int r = 0; r < kHeads; ++r) {
    const V inv = L::set1(inv_sum[r]);
    for (int cc = 0; cc < kChunks; ++cc) L::store(out[r] + L::kWidth * cc, L::mul(acc[r][cc], inv));
  }
}

// Heads h0 .. h0 + kHeads - 1 of the group: all d columns of out.
template <int kHeads>
inline void weighted_heads(const float* scores, int64_t n_pad, int64_t h0, const float* const* v_rows,
                           int64_t head_offset, int64_t n_keys, int64_t d, const float* inv_sums, float* out) {
  const float* p[kHeads];
  float* o[kHeads];
  const int64_t d8 = d / 8 * 8;
  int64_t c = 0;
  auto point = [&](int64_t col) {
    for (int r = 0; r < kHeads; ++r) {
      p[r] = scores + (h0 + r) * n_pad;
      o[r] = out + (h0 + r) * d + col;
    }
  };
#if defined(__AVX512F__)
  for (; c + 32 <= d8; c += 32) {
    point(c);
    weighted_rows<Lanes16, kHeads, 2>(p, v_rows, head_offset + c, n_keys, inv_sums + h0, o);
  }
  for (; c + 16 <= d8; c += 16) {
    point(c);
    weighted_rows<Lanes16, kHeads, 1>(p, v_rows, head_offset + c, n_keys, inv_sums + h0, o);
  }
#endif
  for (; c + 32 <= d8; c += 32) {
    point(c);
    weighted_rows<Lanes8, kHeads, 4>(p, v_rows, head_offset + c, n_keys, inv_sums + h0, o);
  }
  for (; c < d8; c += 8) {
    point(c);
    weighted_rows<Lanes8, kHeads, 1>(p, v_rows, head_offset + c, n_keys, inv_sums + h0, o);
  }
  for (; c < d; ++c)
    for (int64_t r = h0; r < h0 + kHeads; ++r) {
      const float* pr = scores + r * n_pad;
      float acc = 0.0f;
      for (int64_t j = 0; j < n_keys; ++j) acc = std::fma(pr[j], v_rows[j][head_offset + c], acc);
      out[r * d + c] = acc * inv_sums[r];
    }
}

}  // namespace

void attend_group(const float* q, int64_t group, const float* const* k_rows, const float* const* v_rows,
                  int64_t head_offset, int64_t n_keys, int64_t d, float scale, float* scores, float* out, float* lse) {
  const int64_t n_pad = padded_keys(n_keys);
  float* inv_sums = scores + group * n_pad;
  // Scores, eight keys at a time: each key's eight lanes accumulate over d, then one transposing reduction
  // gives the eight dot products. The key block is read once per head from L1.
  for (int64_t jb = 0; jb < n_pad; jb += kKeyBlock) {
    const float* k[kKeyBlock];
    for (int t = 0; t < kKeyBlock; ++t) k[t] = k_rows[jb + t] + head_offset;
    for (int64_t h = 0; h < group; ++h) dot8(q + h * d, k, d, scores + h * n_pad + jb);
  }
  for (int64_t h = 0; h < group; ++h) {
    float* s = scores + h * n_pad;
    // Padding keys get probability exactly 0, so the eight-lane sum over n_pad equals the one over n_keys.
    // Whole blocks of eight keep these loops in single vectors (short loops otherwise spend their time in the
    // vectoriser's prologue and epilogue).
    for (int64_t j = n_keys; j < n_pad; ++j) s[j] = -INFINITY;
    float mb[kKeyBlock];
    for (int t = 0; t < kKeyBlock; ++t) mb[t] = -INFINITY;
    for (int64_t jb = 0; jb < n_pad; jb += kKeyBlock)
      for (int t = 0; t < kKeyBlock; ++t) {
        s[jb + t] *= scale;
        mb[t] = s[jb + t] > mb[t] ? s[jb + t] : mb[t];
      }
    float m = -INFINITY;
    for (int t = 0; t < kKeyBlock; ++t) m = mb[t] > m ? mb[t] : m;
    float lanes[kKeyBlock] = {};
    for (int64_t jb = 0; jb < n_pad; jb += kKeyBlock)
      for (int t = 0; t < kKeyBlock; ++t) {
        s[jb + t] = exp_fixed(s[jb + t] - m);
        lanes[t] += s[jb + t];
      }
    // sum_fixed_order's tree over the eight lanes.
    const float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    inv_sums[h] = 1.0f / sum;
    if (lse) lse[h] = m + std::log(sum);
  }
  int64_t h = 0;
  for (; h + 2 <= group; h += 2) weighted_heads<2>(scores, n_pad, h, v_rows, head_offset, n_keys, d, inv_sums, out);
  for (; h < group; ++h) weighted_heads<1>(scores, n_pad, h, v_rows, head_offset, n_keys, d, inv_sums, out);
}

}  // namespace rlcpp::cpu
