#include "kernels/cpu/attention_query.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/lanes8.h"
#include "kernels/cpu/vec_math.h"

namespace rlcpp::cpu {
namespace {

// out (d) = inv_sum * sum_j p[j] v_j[c0 .. c0 + 8 kChunks), summed in increasing j, one vector per chunk.
template <int kChunks>
inline void weighted_rows(const float* p, const float* const* v_rows, int64_t offset, int64_t n_keys, float inv_sum,
                          float* out) {
  F8 acc[kChunks];
  for (int cc = 0; cc < kChunks; ++cc) acc[cc] = f8_zero();
  for (int64_t j = 0; j < n_keys; ++j) {
    const F8 pj = f8_set1(p[j]);
    const float* v = v_rows[j] + offset;
    for (int cc = 0; cc < kChunks; ++cc) acc[cc] = f8_fma(pj, f8_load(v + 8 * cc), acc[cc]);
  }
  const F8 inv = f8_set1(inv_sum);
  for (int cc = 0; cc < kChunks; ++cc) f8_store(out + 8 * cc, f8_mul(acc[cc], inv));
}

}  // namespace

void attend_group(const float* q, int64_t group, const float* const* k_rows, const float* const* v_rows,
                  int64_t head_offset, int64_t n_keys, int64_t d, float scale, float* scores, float* out, float* lse) {
  const int64_t n_pad = padded_keys(n_keys);
  const int64_t d8 = d / 8 * 8;
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
    const float inv_sum = 1.0f / sum;
    float* o = out + h * d;
    int64_t c = 0;
    for (; c + 32 <= d8; c += 32) weighted_rows<4>(s, v_rows, head_offset + c, n_keys, inv_sum, o + c);
    for (; c < d8; c += 8) weighted_rows<1>(s, v_rows, head_offset + c, n_keys, inv_sum, o + c);
    for (; c < d; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < n_keys; ++j) acc = std::fma(s[j], v_rows[j][head_offset + c], acc);
      o[c] = acc * inv_sum;
    }
    if (lse) lse[h] = m + std::log(sum);
  }
}

}  // namespace rlcpp::cpu
