// Inline float math that the compiler vectorises without -ffast-math, shared by the CPU kernels. std::exp is a
// scalar libm call (~5 ns) that kept SwiGLU, softmax and entropy loops scalar; exp_fixed is branch-free, so a
// loop of them becomes AVX code. Every CPU kernel that exponentiates uses it, so the rollout and trainer paths
// see the same values.
#pragma once

#include <cstdint>
#include <cstring>

namespace rlcpp::cpu {

// e^x within 2 ulp over the float range (Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, then the Cephes
// degree-6 polynomial for e^r and 2^n from the exponent bits). exp_fixed(-inf) = 0, exp_fixed(+inf) = inf,
// NaN stays NaN; results below FLT_MIN flush to 0.
inline float exp_fixed(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;      // ln 2 split so n * kLn2Hi is exact for |n| <= 128
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kMinArg = -87.3365447505f;  // e^kMinArg = FLT_MIN: n stays >= -126, a normal exponent
  constexpr float kMaxArg = 88.3762626647949f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (to nearest even)
  const float xc = x < kMinArg ? kMinArg : (x > kMaxArg ? kMaxArg : x);
  const float n = (xc * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  const float y = er * two_n;
  // Outside the clamped range: exact limits. (x != x) keeps NaN, which the clamp above would have replaced.
  return x < kMinArg ? 0.0f : (x > kMaxArg ? (x != x ? x : __builtin_inff()) : (x != x ? x : y));
}

// A sum of floats in eight lanes of `Acc` (float, or double for a long row's total) combined in a fixed tree:
// vectorises, and the order depends only on how many values were added. add() may be called repeatedly on
// consecutive pieces whose lengths are multiples of 8 (the last piece may be shorter).
template <typename Acc>
class LaneSumOf {
 public:
  void add(const float* x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lane_[j] += x[i + j];
    for (int j = 0; i < n; ++i, ++j) lane_[j] += x[i];
  }
  Acc total() const {
    return ((lane_[0] + lane_[1]) + (lane_[2] + lane_[3])) + ((lane_[4] + lane_[5]) + (lane_[6] + lane_[7]));
  }

 private:
  Acc lane_[8] = {};
};
using LaneSum = LaneSumOf<float>;

inline float sum_fixed_order(const float* x, int64_t n) {
  LaneSum s;
  s.add(x, n);
  return s.total();
}

}  // namespace rlcpp::cpu
