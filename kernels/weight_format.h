// How a packed weight stores its values (ops::PackedWeight): the compute dtype's own format, or a rollout
// quantisation (weight-only, one scale per output channel). Shared by ops.h and the CPU kernels.
#pragma once

#include <string>

namespace rlcpp {

enum class WeightFormat {
  kF32,
  kBF16,
  kF16,
  kInt8,     // symmetric: q = round(w / s) in [-127, 127], s = max |w of the channel| / 127
  kFp8E4M3,  // q = e4m3(w / s), s = max |w of the channel| / 448
};

const char* weight_format_name(WeightFormat format);
inline bool is_quantized(WeightFormat format) {
  return format == WeightFormat::kInt8 || format == WeightFormat::kFp8E4M3;
}

}  // namespace rlcpp
