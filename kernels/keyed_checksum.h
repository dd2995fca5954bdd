// The term one element adds to ops::keyed_checksum, the same on the host and in CUDA kernels: a Philox draw
// (core/philox.h) keyed by the element's index and counting its 32 bits, so a changed bit or a value moved to
// another index changes the term, and the terms are summed modulo 2^64, which any order of adding (threads,
// blocks) gives the same 64 bits of.
#pragma once

#include <cstdint>

#include "core/philox.h"

namespace rlcpp {

// A fixed key: the checksum is a function of the data alone.
inline constexpr uint64_t kKeyedChecksumSeed = 0x72636c7070737963ull;

RLCPP_HOST_DEVICE inline uint64_t keyed_checksum_term(int64_t index, uint32_t bits) {
  const uint64_t i = static_cast<uint64_t>(index);
  const PhiloxDraw d = philox_draw(kKeyedChecksumSeed, static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                                   bits, 0);
  return (static_cast<uint64_t>(d.v[1]) << 32) | d.v[0];
}

}  // namespace rlcpp
