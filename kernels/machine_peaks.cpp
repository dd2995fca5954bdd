#include "kernels/machine_peaks.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/tensor.h"
#include "kernels/ops.h"

namespace rlcpp {

namespace {

// The seconds of `iters` timed calls after an untimed one, sorted (fastest first).
template <class F> std::vector<double> sorted_seconds(F&& fn, int iters) {
  fn();  // warm-up: page faults, BLAS buffers, thread start
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times;
}

template <class F> double median_seconds(F&& fn, int iters) {
  const std::vector<double> times = sorted_seconds(fn, iters);
  return times[times.size() / 2];
}

}  // namespace

double measure_matmul_flops(int64_t m, int64_t n, int64_t k, int iters) {
  RLCPP_CHECK(m > 0 && n > 0 && k > 0 && iters > 0,
              "measure_matmul_flops: sizes and iterations must be positive, got " << m << "x" << n << "x" << k
                                                                                  << ", " << iters << " iterations");
  const ExecContext host = ExecContext::cpu();
  Tensor a = host.empty({m, k}), b = host.empty({k, n}), c = host.empty({m, n});
  PhiloxStream rng(1, 1);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = rng.uniform() - 0.5f;
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = rng.uniform() - 0.5f;
  const double seconds = sorted_seconds([&] { ops::matmul(host, a, false, b, false, c); }, iters).front();
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / seconds;
}

double measure_packed_bf16_flops(int64_t m, int64_t n, int64_t k, int iters) {
  RLCPP_CHECK(m > 0 && n > 0 && k > 0 && iters > 0,
              "measure_packed_bf16_flops: sizes and iterations must be positive, got "
                  << m << "x" << n << "x" << k << ", " << iters << " iterations");
  const ExecContext host = ExecContext::cpu();
  Tensor x = host.empty({m, k}), w = host.empty({n, k}), y = host.empty({m, n});
  PhiloxStream rng(1, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform() - 0.5f;
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = rng.uniform() - 0.5f;
  ops::PackedWeight packed;
  ops::pack_weight(host, w, packed, DType::kBF16);
  const double seconds = sorted_seconds([&] { ops::matmul_packed(host, x, packed, y); }, iters).front();
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / seconds;
}

double measure_copy_bandwidth(int64_t bytes, int iters) {
  RLCPP_CHECK(bytes > 0 && iters > 0, "measure_copy_bandwidth: bytes and iterations must be positive, got "
                                          << bytes << " bytes, " << iters << " iterations");
  std::vector<char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes));
  // 1 MiB chunks over every thread: one core alone cannot draw the machine's bandwidth, and a decode step
  // reads its weights on every thread.
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int64_t chunks = (bytes + kChunk - 1) / kChunk;
  const double seconds = median_seconds(
      [&] {
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t begin = c * kChunk;
          std::memcpy(dst.data() + begin, src.data() + begin, static_cast<size_t>(std::min(kChunk, bytes - begin)));
        }
      },
      iters);
  RLCPP_CHECK(dst[static_cast<size_t>(bytes - 1)] == 1, "measure_copy_bandwidth: the copy did not arrive");
  return 2.0 * static_cast<double>(bytes) / seconds;
}

double measure_read_bandwidth(int64_t bytes, int iters) {
  RLCPP_CHECK(bytes >= 4 && iters > 0, "measure_read_bandwidth: bytes (>= 4) and iterations must be positive, got "
                                           << bytes << " bytes, " << iters << " iterations");
  const int64_t n = bytes / 4;
  std::vector<float> src(static_cast<size_t>(n), 1.0f);
  double total = 0;
  constexpr int64_t kLanes = 64;  // independent partial sums: several vector add chains, so the loads limit
  const int64_t blocks = n / kLanes;
  const double seconds = median_seconds(
      [&] {
        double sum = 0;
        // Every thread sums its share; the sum only keeps the reads from being optimised away.
#pragma omp parallel reduction(+ : sum)
        {
          float part[kLanes] = {};
#pragma omp for schedule(static)
          for (int64_t b = 0; b < blocks; ++b) {
            const float* p = src.data() + b * kLanes;
            for (int64_t j = 0; j < kLanes; ++j) part[j] += p[j];
          }
          for (int64_t j = 0; j < kLanes; ++j) sum += part[j];
        }
        total += sum;
      },
      iters);
  RLCPP_CHECK(total > 0, "measure_read_bandwidth: the reads did not happen");
  return 4.0 * static_cast<double>(blocks * kLanes) / seconds;
}

}  // namespace rlcpp
