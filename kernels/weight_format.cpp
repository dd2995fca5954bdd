#include "kernels/weight_format.h"

namespace rlcpp {

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return "fp32";
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kF16: return "fp16";
    case WeightFormat::kInt8: return "int8";
    case WeightFormat::kFp8E4M3: return "fp8_e4m3";
  }
  return "?";
}

}  // namespace rlcpp
