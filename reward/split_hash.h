// The train/test split every task shares: a problem is held out iff splitmix64(key) % 10 == 0, where `key`
// packs the problem's operands into one integer (documented per task in reward/README.md). Hashing, rather
// than a plain modulus of the operands, keeps the held-out set in distribution: `b % 10 == 0` would put every
// b ending in 0 in the test split.
#pragma once

#include <cstdint>
#include <string_view>

namespace rlcpp {

// The standard splitmix64 output function applied to x + golden gamma, all mod 2^64.
constexpr uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kTestSplitModulus = 10;

constexpr bool is_test_key(uint64_t key) { return splitmix64(key) % kTestSplitModulus == 0; }

// FNV-1a (64-bit) of a string: the key of a free-text problem (dataset tasks hash their prompt).
constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace rlcpp
