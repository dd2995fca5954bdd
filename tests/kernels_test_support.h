// Helpers shared by the kernels tests: seeded random tensors, guard-byte buffers, comparisons that NaN never
// passes, a central-difference gradient checker and error capture.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace rlcpp::testing {

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  // Standard normal entries times scale.
  Tensor normal(Shape shape, float scale = 1.0f) {
    Tensor t = Tensor::empty(std::move(shape));
    fill_normal(t, scale);
    return t;
  }
  void fill_normal(Tensor& t, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen_);
  }
  int32_t uniform_int(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(gen_); }
  std::mt19937& gen() { return gen_; }

 private:
  std::mt19937 gen_;
};

inline Tensor int_tensor(const std::vector<int32_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

inline Tensor filled(Shape shape, float value) {
  Tensor t = Tensor::empty(std::move(shape));
  std::fill_n(t.data<float>(), t.numel(), value);
  return t;
}

inline std::vector<float> values_of(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// An fp32 tensor with kGuard canary floats before and after it (ggml style): an op that writes outside its
// output shows up as a changed canary. The tensor starts filled with NaN so unwritten outputs fail comparisons.
class Guarded {
 public:
  static constexpr int64_t kGuard = 64;
  static constexpr uint32_t kCanaryBits = 0x7fa5a5a5u;  // a signalling-NaN pattern no kernel produces

  explicit Guarded(Shape shape) : storage_(static_cast<size_t>(shape_numel(shape) + 2 * kGuard)) {
    float canary;
    std::memcpy(&canary, &kCanaryBits, sizeof canary);
    std::fill(storage_.begin(), storage_.end(), canary);
    tensor_ = Tensor::borrow(storage_.data() + kGuard, std::move(shape));
    std::fill_n(tensor_.data<float>(), tensor_.numel(), std::nanf(""));
  }
  Tensor& t() { return tensor_; }
  float* data() { return tensor_.data<float>(); }
  void copy_from(const Tensor& src) { std::memcpy(data(), src.data<float>(), tensor_.nbytes()); }
  bool guards_intact() const {
    const int64_t n = tensor_.numel();
    for (int64_t i = 0; i < kGuard; ++i) {
      uint32_t before, after;
      std::memcpy(&before, &storage_[static_cast<size_t>(i)], sizeof before);
      std::memcpy(&after, &storage_[static_cast<size_t>(kGuard + n + i)], sizeof after);
      if (before != kCanaryBits || after != kCanaryBits) return false;
    }
    return true;
  }

 private:
  std::vector<float> storage_;
  Tensor tensor_;
};

// Every element of actual within abs_tol + rel_tol * |expected|; NaN fails. Reports the first few misses.
inline void expect_near_all(const Tensor& actual, const std::vector<double>& expected, double abs_tol,
                            double rel_tol, const std::string& what) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << what;
  const float* a = actual.data<float>();
  int misses = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(static_cast<double>(a[i]) - expected[i]);
    if (!(err <= abs_tol + rel_tol * std::abs(expected[i]))) {
      if (++misses <= 5) ADD_FAILURE() << what << "[" << i << "] = " << a[i] << ", expected " << expected[i];
    }
  }
  EXPECT_EQ(misses, 0) << what << ": " << misses << " of " << expected.size() << " elements differ";
}

// Bit-for-bit equality of two float buffers (batch invariance).
inline bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

struct GradCheckResult {
  double max_err = 0.0;   // max |analytic - finite difference| over elements
  double max_grad = 0.0;  // max |finite difference|, the scale errors are judged against
};

// Central differences of a scalar objective (evaluated in double from an fp32 forward) with respect to every
// element of x, compared with the analytic gradient.
inline GradCheckResult check_gradient(Tensor& x, const std::vector<float>& analytic,
                                      const std::function<double()>& objective, float h = 1e-3f) {
  GradCheckResult r;
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float orig = p[i];
    const float up = orig + h;
    const float down = orig - h;
    p[i] = up;
    const double plus = objective();
    p[i] = down;
    const double minus = objective();
    p[i] = orig;
    // The step actually taken in float, not the nominal 2h.
    const double fd = (plus - minus) / (static_cast<double>(up) - static_cast<double>(down));
    const double err = std::abs(fd - static_cast<double>(analytic[static_cast<size_t>(i)]));
    r.max_err = std::isnan(err) || std::isnan(r.max_err) ? NAN : std::max(r.max_err, err);
    r.max_grad = std::max(r.max_grad, std::abs(fd));
  }
  return r;
}

// Tolerance for check_gradient, relative to the largest gradient. With h = 1e-3 the truncation error is
// O(h^2) ~ 1e-6; the noise is the fp32 rounding of the outputs that the perturbed input changes, ~6e-8 |f| each,
// divided by 2h, i.e. ~3e-5 per output touched, so 1e-2 of the largest gradient leaves two orders of margin
// while a wrong sign, a missing term or a factor off by 5% on the largest element exceeds it.
inline constexpr double kGradRelTol = 1e-2;

inline bool gradient_ok(const GradCheckResult& r) {
  return r.max_grad > 1e-3 && r.max_err <= kGradRelTol * r.max_grad;
}

#define EXPECT_GRAD_OK(result, what)                                                                 \
  EXPECT_TRUE(::rlcpp::testing::gradient_ok(result))                                                \
      << (what) << ": max |analytic - fd| = " << (result).max_err << ", max |grad| = " << (result).max_grad

// sum(w * x) in double: the random scalar objective that turns an op's output into a number.
inline double weighted_sum(const Tensor& w, const Tensor& x) {
  double s = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i)
    s += static_cast<double>(w.data<float>()[i]) * static_cast<double>(x.data<float>()[i]);
  return s;
}

// The message of the rlcpp::Error f throws, or "" when it does not throw.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_MENTIONS(message, needle) \
  EXPECT_NE((message).find(needle), std::string::npos) << "message: \"" << (message) << "\" lacks \"" << (needle) << "\""

}  // namespace rlcpp::testing
