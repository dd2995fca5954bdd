#include "core/philox.h"

#include <cmath>

#include "core/error.h"

namespace rlcpp {

uint64_t PhiloxStream::below(uint64_t n) {
  RLCPP_CHECK(n > 0, "PhiloxStream::below(0)");
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  while (true) {
    uint64_t x = next_u64();
    if (x < limit) return x % n;
  }
}

float PhiloxStream::normal() {
  // 1 - u keeps the log argument in (0, 1].
  double u1 = 1.0 - philox_uniform_double(next_u32(), next_u32());
  double u2 = philox_uniform_double(next_u32(), next_u32());
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

void PhiloxStream::restore(uint64_t index, int buffered) {
  RLCPP_CHECK(buffered >= 0 && buffered <= 4, "PhiloxStream::restore: buffered " << buffered << " not in [0, 4]");
  if (buffered == 0) {
    index_ = index;
    have_ = 0;
    return;
  }
  RLCPP_CHECK(index >= 1, "PhiloxStream::restore: buffered words with index 0");
  index_ = index - 1;
  have_ = 0;
  next_u32();  // refills the block index-1 and advances index_ to `index`
  have_ = buffered;
}

}  // namespace rlcpp
