// The temperature range every caller shares: the log-prob kernels, the sampler, the forward, the CLI options
// and the config keys all accept the same values and reject the rest naming the option.
#pragma once

#include <string>

namespace rlcpp {

// The lowest temperature accepted (besides 0 = greedy where a caller offers it). The kernels compute
// logits / T in fp32: a subnormal T such as 1e-45 passes T > 0 but makes 1 / T infinite, and every log-prob
// NaN. At 1e-3 a logit overflows only past 3.4e35 (fp32's largest value times T), far beyond any model's.
// Colder than that, ask for 0 (greedy) where the caller offers it. The help texts of the --temperature options
// and of rollout.sampling.temperature spell the value out.
inline constexpr float kMinTemperature = 1e-3f;

// Throws "WHAT: temperature T is not ..." unless t is finite and >= kMinTemperature, or t is 0 and
// `zero_is_greedy`. `what` names the option or key.
void check_temperature(double t, const std::string& what, bool zero_is_greedy);

}  // namespace rlcpp
