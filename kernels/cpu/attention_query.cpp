#include "kernels/cpu/attention_query.h"

#include <cmath>

#include "kernels/cpu/vec_math.h"

namespace rlcpp::cpu {

void attend_query(const float* q, const float* const* k_rows, const float* const* v_rows, int64_t head_offset,
                  int64_t n_keys, int64_t d, float scale, float* scores, float* out, float* lse) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n_keys; ++j) {
    const float s = dot_fixed_order(q, k_rows[j] + head_offset, d) * scale;
    scores[j] = s;
    m = s > m ? s : m;
  }
  for (int64_t j = 0; j < n_keys; ++j) scores[j] = exp_fixed(scores[j] - m);
  const float sum = sum_fixed_order(scores, n_keys);
  for (int64_t c = 0; c < d; ++c) out[c] = 0.0f;
  for (int64_t j = 0; j < n_keys; ++j) {
    const float* v = v_rows[j] + head_offset;
    const float p = scores[j];
    for (int64_t c = 0; c < d; ++c) out[c] += p * v[c];
  }
  const float inv_sum = 1.0f / sum;
  for (int64_t c = 0; c < d; ++c) out[c] *= inv_sum;
  if (lse) *lse = m + std::log(sum);
}

}  // namespace rlcpp::cpu
