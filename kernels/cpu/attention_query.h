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
// Lane l sums a[i] b[i] over i = l (mod 8) in increasing i; the lanes are then added as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). attend_group computes its scores in this same order.
inline float dot_fixed_order(const float* a, const float* b, int64_t n) {
  float lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) lane[j] += a[i] * b[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Keys are scored eight at a time; the pointer arrays and score rows are padded to a multiple of this.
inline constexpr int64_t kKeyBlock = 8;
inline int64_t padded_keys(int64_t n_keys) { return (n_keys + kKeyBlock - 1) / kKeyBlock * kKeyBlock; }

// The `group` query heads q (group,d) that share one KV head, against keys 0..n_keys-1 in order. Per head:
// s_j = scale * (q . k_j) (eight lanes over d, fixed tree), m = max s, p_j = exp(s_j - m),
// out (d) = sum_j p_j v_j (in increasing j) / sum_j p_j (eight lanes over j, fixed tree), lse = m + log sum p.
// Key row j is k_rows[j] + head_offset (d floats), likewise v; k_rows/v_rows hold padded_keys(n_keys) valid
// pointers (the padding is read but ignored). scores is scratch of group * (padded_keys(n_keys) + 1) floats. out
// (group,d); lse (group) or null. A head's result depends only on its q and the keys, never on group or on the
// position of a key in its block of eight. Defined out of line, in one place, so that both callers execute the
// very same instructions.
void attend_group(const float* q, int64_t group, const float* const* k_rows, const float* const* v_rows,
                  int64_t head_offset, int64_t n_keys, int64_t d, float scale, float* scores, float* out, float* lse);

// Per-thread scratch reused across query rows.
struct AttendScratch {
  std::vector<float> scores;
  std::vector<const float*> k_rows;
  std::vector<const float*> v_rows;
  AttendScratch(int64_t max_keys, int64_t group)
      : scores(static_cast<size_t>(group * (padded_keys(max_keys) + 1))),
        k_rows(static_cast<size_t>(padded_keys(max_keys))), v_rows(static_cast<size_t>(padded_keys(max_keys))) {}
};

// All hq heads of one query row q_row (hq,d) against positions 0..n_keys-1 of its sequence. KvRows provides
// gather(n, k_rows, v_rows): pointers to positions 0..n-1's (hkv,d) rows. GQA: head h reads kv head
// h / (hq/hkv), so the heads of kv head g are the contiguous g*group..(g+1)*group-1. out_row (hq,d); lse_row
// (hq) or null.
template <class KvRows>
inline void attend_query_row(const float* q_row, const KvRows& rows, int64_t n_keys, int64_t hq, int64_t hkv,
                             int64_t d, float scale, AttendScratch& scratch, float* out_row, float* lse_row) {
  const float** k_rows = scratch.k_rows.data();
  const float** v_rows = scratch.v_rows.data();
  rows.gather(n_keys, k_rows, v_rows);
  for (int64_t j = n_keys; j < padded_keys(n_keys); ++j) {
    k_rows[j] = k_rows[0];
    v_rows[j] = v_rows[0];
  }
  const int64_t group = hq / hkv;
  for (int64_t g = 0; g < hkv; ++g) {
    attend_group(q_row + g * group * d, group, k_rows, v_rows, g * d, n_keys, d, scale, scratch.scores.data(),
                 out_row + g * group * d, lse_row ? lse_row + g * group : nullptr);
  }
}

}  // namespace rlcpp::cpu
