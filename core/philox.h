// Counter-based randomness (Random123 Philox-4x32-10): a draw is a pure function of (seed, counter), so
// the same seed gives the same numbers whatever the batch composition, order or number of workers.
// The header is host/device clean, so CUDA kernels draw the same numbers.
#pragma once

#include <Random123/philox.h>

#include <cstdint>

namespace rlcpp {

#if defined(__CUDACC__)
#define RLCPP_HOST_DEVICE __host__ __device__
#else
#define RLCPP_HOST_DEVICE
#endif

struct PhiloxDraw {
  uint32_t v[4];
};

// Four 32-bit words for the counter (a, b, c, d) under a 64-bit seed.
RLCPP_HOST_DEVICE inline PhiloxDraw philox_draw(uint64_t seed, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  r123::Philox4x32 rng;
  r123::Philox4x32::key_type key = {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  r123::Philox4x32::ctr_type ctr = {{a, b, c, d}};
  r123::Philox4x32::ctr_type out = rng(ctr, key);
  return PhiloxDraw{{out[0], out[1], out[2], out[3]}};
}

// `Lanes` draws at once, lane l's counter (a, b, c0 + l, d): for each lane the words philox_draw gives (Random123's
// Philox-4x32-10 rounds written across lanes, which the compiler vectorises: 16 draws take about the time of 6
// philox_draw calls in a loop).
template <int Lanes>
inline void philox_draw_lanes(uint64_t seed, uint32_t a, uint32_t b, uint32_t c0, uint32_t d,
                              uint32_t (&out)[4][Lanes]) {
  uint32_t* x0 = out[0];
  uint32_t* x1 = out[1];
  uint32_t* x2 = out[2];
  uint32_t* x3 = out[3];
  for (int l = 0; l < Lanes; ++l) {
    x0[l] = a;
    x1[l] = b;
    x2[l] = c0 + static_cast<uint32_t>(l);
    x3[l] = d;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += PHILOX_W32_0;
      k1 += PHILOX_W32_1;
    }
    for (int l = 0; l < Lanes; ++l) {
      const uint64_t p0 = uint64_t{PHILOX_M4x32_0} * x0[l], p1 = uint64_t{PHILOX_M4x32_1} * x2[l];
      const uint32_t y0 = static_cast<uint32_t>(p1 >> 32) ^ x1[l] ^ k0;
      const uint32_t y2 = static_cast<uint32_t>(p0 >> 32) ^ x3[l] ^ k1;
      x1[l] = static_cast<uint32_t>(p1);
      x3[l] = static_cast<uint32_t>(p0);
      x0[l] = y0;
      x2[l] = y2;
    }
  }
}

// Uniform in [0, 1) with 24 random bits (exactly representable as float).
RLCPP_HOST_DEVICE inline float philox_uniform(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }

// Uniform in [0, 1) with 53 random bits from two words.
RLCPP_HOST_DEVICE inline double philox_uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t x = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(x & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// A sequential stream for host-side uses (initialisation, shuffles): counter = (stream, index).
class PhiloxStream {
 public:
  PhiloxStream(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  uint32_t next_u32() {
    if (have_ == 0) {
      buf_ = philox_draw(seed_, static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32),
                         static_cast<uint32_t>(index_), static_cast<uint32_t>(index_ >> 32));
      ++index_;
      have_ = 4;
    }
    return buf_.v[4 - have_--];
  }
  uint64_t next_u64() { return (static_cast<uint64_t>(next_u32()) << 32) | next_u32(); }
  float uniform() { return philox_uniform(next_u32()); }
  // Uniform integer in [0, n) without modulo bias.
  uint64_t below(uint64_t n);
  // Standard normal (Box-Muller).
  float normal();
  // Position in the stream, for checkpoints: (blocks drawn, words left in the current block).
  uint64_t index() const { return index_; }
  int buffered() const { return have_; }
  void restore(uint64_t index, int buffered);

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t index_ = 0;
  PhiloxDraw buf_{};
  int have_ = 0;
};

}  // namespace rlcpp
