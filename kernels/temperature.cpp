#include "kernels/temperature.h"

#include <cmath>

#include "core/error.h"

namespace rlcpp {

void check_temperature(double t, const std::string& what, bool zero_is_greedy) {
  if (zero_is_greedy && t == 0) return;
  RLCPP_CHECK(std::isfinite(t) && t >= kMinTemperature,
              what << ": temperature " << t << " is not " << (zero_is_greedy ? "0 (greedy) or " : "")
                   << "a finite number >= " << kMinTemperature
                   << " (below it logits / temperature overflow fp32 and log-probs become NaN)");
}

}  // namespace rlcpp
