#include "kernels/logprob_scoring.h"

#include <sstream>

#include "core/error.h"
#include "kernels/temperature.h"

namespace rlcpp {

std::string LogprobScoring::describe() const {
  std::ostringstream s;
  s << "temperature " << temperature << ", top_k " << truncation.top_k << ", top_p " << truncation.top_p;
  return s.str();
}

LogprobScoring logprob_scoring(float sampling_temperature, int64_t top_k, float top_p, bool truncated_space) {
  const bool greedy = sampling_temperature <= 0;
  LogprobScoring scoring;
  scoring.temperature = greedy ? 1.0f : sampling_temperature;
  if (truncated_space && !greedy) scoring.truncation = Truncation{top_k, top_p};
  return scoring;
}

void check_logprob_scoring(const LogprobScoring& scoring, const std::string& what) {
  check_temperature(scoring.temperature, what, /*zero_is_greedy=*/false);
  const Truncation& t = scoring.truncation;
  RLCPP_CHECK(t.top_k >= 0 && t.top_p > 0.0f && t.top_p <= 1.0f,
              what << ": top_k " << t.top_k << " must be >= 0 and top_p " << t.top_p << " in (0, 1]");
}

}  // namespace rlcpp
