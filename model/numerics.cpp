#include "model/numerics.h"

#include "core/error.h"
#include "model/executor.h"

namespace rlcpp {

DType ModelNumerics::compute_format() const {
  switch (compute) {
    case DType::kBF16: return DType::kBF16;
    case DType::kF16: return DType::kF16;
    default: return DType::kF32;
  }
}

std::string ModelNumerics::describe() const {
  std::string s = compute_dtype_name(compute);
  if (is_quantized(linear_weights)) s += std::string("+") + precision_name(linear_weights);
  if (!batch_invariant) s += " (not batch-invariant)";
  return s;
}

void ModelNumerics::validate(const std::string& where) const {
  RLCPP_CHECK(is_float_storage(compute) || compute == DType::kTF32,
              where << ": compute dtype " << dtype_name(compute) << " is not one of fp32, tf32, bf16, fp16");
  RLCPP_CHECK(is_quantized(linear_weights) || linear_weights == compute_format(),
              where << ": Linear weights in " << precision_name(linear_weights) << " under a "
                    << compute_dtype_name(compute) << " model (expected " << precision_name(compute_format())
                    << ", int8 or fp8_e4m3)");
}

DType parse_compute_dtype(const std::string& name, const std::string& key) {
  DType dtype;
  if (parse_precision(name, &dtype) && (is_float_storage(dtype) || dtype == DType::kTF32)) return dtype;
  RLCPP_FAIL("config key '" << key << "': \"" << name << "\" is not a compute dtype (fp32, tf32, bf16, fp16)");
}

const char* compute_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kTF32: return "tf32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    default: return dtype_name(dtype);
  }
}

DType parse_quantization(const std::string& name, DType compute, const std::string& key) {
  if (name == "none") return ModelNumerics{compute}.compute_format();
  if (name == "int8") return DType::kInt8;
  if (name == "fp8_e4m3") return DType::kFp8E4M3;
  RLCPP_FAIL("config key '" << key << "': \"" << name << "\" is not a quantization (none, int8, fp8_e4m3)");
}

void check_numerics_device(const ModelNumerics& numerics, Device device, const std::string& dtype_key,
                           const std::string& invariant_key) {
  if (numerics.compute != DType::kTF32) return;
  RLCPP_CHECK(executor_for(device).product_math(DType::kTF32) == DType::kTF32,
              "config key '" << dtype_key << "': \"tf32\" multiplies on CUDA tensor cores, but this role runs on the "
                             << "CPU; use fp32 there (or a cuda device)");
  RLCPP_CHECK(!numerics.batch_invariant,
              "config key '" << dtype_key << "': \"tf32\" has no batch-invariant form (the packed fma chain "
                             << "multiplies fp32 operands), but " << invariant_key
                             << " is true; set it to false, or use fp32");
}

ModelNumerics make_numerics(const std::string& dtype, const std::string& quantization, bool batch_invariant,
                            const std::string& dtype_key, const std::string& quantization_key) {
  ModelNumerics n;
  n.compute = parse_compute_dtype(dtype, dtype_key);
  n.linear_weights = parse_quantization(quantization, n.compute, quantization_key);
  n.batch_invariant = batch_invariant;
  return n;
}

}  // namespace rlcpp
