// Per-token log-probability and entropy of softmax(logits / T) on the CPU, and their backward.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/parallel_errors.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/truncation.h"

namespace rlcpp::cpu {
namespace {

// Vocabulary entries per piece: the exponentials of a piece go to a stack buffer so that loop vectorises,
// then a LaneSum adds them in an order fixed by the row length.
constexpr int64_t kPiece = 512;

// logsumexp of z = row / temperature.
float row_lse(const float* row, float temperature, int64_t v) {
  float m = -INFINITY;
  for (int64_t j = 0; j < v; ++j) {
    const float z = row[j] / temperature;
    m = z > m ? z : m;
  }
  float buf[kPiece];
  LaneSum sum;
  for (int64_t j0 = 0; j0 < v; j0 += kPiece) {
    const int64_t len = std::min(kPiece, v - j0);
    for (int64_t j = 0; j < len; ++j) buf[j] = exp_fixed(row[j0 + j] / temperature - m);
    sum.add(buf, len);
  }
  return m + std::log(sum.total());
}

// H = -sum p log p with log p = z - lse.
float row_entropy(const float* row, float temperature, float lse, int64_t v) {
  float buf[kPiece];
  LaneSum sum;
  for (int64_t j0 = 0; j0 < v; j0 += kPiece) {
    const int64_t len = std::min(kPiece, v - j0);
    for (int64_t j = 0; j < len; ++j) {
      const float logp = row[j0 + j] / temperature - lse;
      buf[j] = exp_fixed(logp) * logp;
    }
    sum.add(buf, len);
  }
  return -sum.total();
}

// logsumexp of z = row / temperature over the entries with in_set[j] = 1: row_lse's sum with the others 0.
float row_lse_in_set(const float* row, const uint8_t* in_set, float temperature, int64_t v) {
  float m = -INFINITY;
  for (int64_t j = 0; j < v; ++j) {
    const float z = row[j] / temperature;
    m = in_set[j] && z > m ? z : m;
  }
  float buf[kPiece];
  LaneSum sum;
  for (int64_t j0 = 0; j0 < v; j0 += kPiece) {
    const int64_t len = std::min(kPiece, v - j0);
    for (int64_t j = 0; j < len; ++j) buf[j] = in_set[j0 + j] ? exp_fixed(row[j0 + j] / temperature - m) : 0.0f;
    sum.add(buf, len);
  }
  return m + std::log(sum.total());
}

}  // namespace

float row_logprob_truncated(const float* row, int32_t target, float temperature, const Truncation& t,
                            TruncationScratch& s, int64_t v, float* lse) {
  const KeptSet set = truncation_kept_set(row, v, temperature, t, s);
  kept_mask(set, target, s, v);
  const float l = row_lse_in_set(row, s.in_set.data(), temperature, v);
  if (lse) *lse = l;
  return row[target] / temperature - l;
}

void logprob_truncated_forward(const float* logits, const int32_t* targets, float temperature, const Truncation& t,
                               float* logp, float* lse, int64_t n, int64_t v) {
  // truncation_kept_set throws on a row of non-finite logits: rethrown after the region.
  ParallelErrors errors(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel if (n * v > kParallelMinWork)
  {
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    TruncationScratch s;
#pragma omp for
    for (int64_t i = 0; i < n; ++i) {
      if (targets[i] < 0) {
        logp[i] = lse[i] = 0.0f;
        continue;
      }
      errors.run(thread, [&] {
        logp[i] = row_logprob_truncated(logits + i * v, targets[i], temperature, t, s, v, &lse[i]);
      });
    }
  }
  errors.rethrow_first();
}

void logprob_truncated_backward(const float* dlogp, const float* logits, const int32_t* targets, float temperature,
                                const Truncation& t, const float* lse, float* dlogits, int64_t n, int64_t v) {
  // d logp / dz_j = [j = target] - p_j over the kept set (the set itself is a constant), 0 outside it.
  ParallelErrors errors(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel if (n * v > kParallelMinWork)
  {
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    TruncationScratch s;
#pragma omp for
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits + i * v;
      float* drow = dlogits + i * v;
      const int32_t target = targets[i];
      if (target < 0) {
        std::fill(drow, drow + v, 0.0f);
        continue;
      }
      errors.run(thread, [&] { kept_mask(truncation_kept_set(row, v, temperature, t, s), target, s, v); });
      if (errors.failed(thread)) continue;
      const float g = dlogp[i];
      for (int64_t j = 0; j < v; ++j)
        drow[j] = s.in_set[j] ? -g * exp_fixed(row[j] / temperature - lse[i]) / temperature : 0.0f;
      drow[target] += g / temperature;
    }
  }
  errors.rethrow_first();
}

float row_logprob(const float* row, int32_t target, float temperature, int64_t v) {
  return row[target] / temperature - row_lse(row, temperature, v);
}

void logprob_forward(const float* logits, const int32_t* targets, float temperature, float* logp, float* lse,
                     float* entropy, int64_t n, int64_t v) {
#pragma omp parallel for if (n * v > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * v;
    const float l = row_lse(row, temperature, v);
    lse[i] = l;
    const int32_t t = targets[i];
    logp[i] = t < 0 ? 0.0f : row[t] / temperature - l;  // row_logprob's expression
    if (entropy) entropy[i] = row_entropy(row, temperature, l, v);
  }
}

void logprob_backward(const float* dlogp, const float* dentropy, const float* logits, const int32_t* targets,
                      float temperature, const float* lse, float* dlogits, int64_t n, int64_t v) {
  // d logp / dz = onehot - p; dH/dz = -p (log p + H); dz/dlogits = 1/T.
#pragma omp parallel for if (n * v > kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * v;
    float* drow = dlogits + i * v;
    const float l = lse[i];
    const int32_t t = targets[i];
    const float g_logp = t < 0 ? 0.0f : dlogp[i];
    const float g_ent = dentropy ? dentropy[i] : 0.0f;
    const float h = g_ent != 0.0f ? row_entropy(row, temperature, l, v) : 0.0f;
    for (int64_t j = 0; j < v; ++j) {
      const float logp_j = row[j] / temperature - l;
      const float p = exp_fixed(logp_j);
      drow[j] = (-g_logp * p - g_ent * p * (logp_j + h)) / temperature;
    }
    if (t >= 0) drow[t] += g_logp / temperature;
  }
}

}  // namespace rlcpp::cpu
