// The one per-query attention routine behind both attention_forward (training, contiguous keys) and
// paged_attention (rollout, keys in cache blocks). A key/value row accessor says where position j of a
// sequence lives; everything after that is the same code, so a cached decode returns the training forward's
// values bit for bit and a row's result never depends on the other rows of the call (ops.h, batch invariance).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rlcpp::cpu {

// a . b over n floats in eight lanes combined in a fixed tree: vectorises, and the order depends only on n.
inline float dot_fixed_order(const float* a, const float* b, int64_t n) {
  float lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) lane[j] += a[i] * b[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// One query head against keys 0..n_keys-1 in order: scores s_j = scale * q . k_j, m = max s, p_j = exp(s_j - m),
// out (d) = sum_j p_j v_j / sum_j p_j, *lse = m + log(sum_j p_j) when lse is non-null. Key row j of this head is
// k_rows[j] + head_offset (d floats), likewise v. scores is scratch of n_keys floats. Defined out of line, in
// one place, so that both callers execute the very same instructions.
void attend_query(const float* q, const float* const* k_rows, const float* const* v_rows, int64_t head_offset,
                  int64_t n_keys, int64_t d, float scale, float* scores, float* out, float* lse);

// Per-thread scratch reused across query rows.
struct AttendScratch {
  std::vector<float> scores;
  std::vector<const float*> k_rows;
  std::vector<const float*> v_rows;
  explicit AttendScratch(int64_t max_keys)
      : scores(static_cast<size_t>(max_keys)), k_rows(static_cast<size_t>(max_keys)),
        v_rows(static_cast<size_t>(max_keys)) {}
};

// All hq heads of one query row q_row (hq,d) against positions 0..n_keys-1 of its sequence. KvRows provides
// key_row(j) and value_row(j): pointers to position j's (hkv,d) rows. GQA: head h reads kv head h / (hq/hkv).
// out_row (hq,d); lse_row (hq) or null.
template <class KvRows>
inline void attend_query_row(const float* q_row, const KvRows& rows, int64_t n_keys, int64_t hq, int64_t hkv,
                             int64_t d, float scale, AttendScratch& scratch, float* out_row, float* lse_row) {
  for (int64_t j = 0; j < n_keys; ++j) {
    scratch.k_rows[static_cast<size_t>(j)] = rows.key_row(j);
    scratch.v_rows[static_cast<size_t>(j)] = rows.value_row(j);
  }
  const int64_t group = hq / hkv;
  for (int64_t h = 0; h < hq; ++h) {
    attend_query(q_row + h * d, scratch.k_rows.data(), scratch.v_rows.data(), (h / group) * d, n_keys, d, scale,
                 scratch.scores.data(), out_row + h * d, lse_row ? lse_row + h : nullptr);
  }
}

}  // namespace rlcpp::cpu
