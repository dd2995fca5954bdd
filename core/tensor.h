// Tensor: shape, dtype, device and a shared buffer; either owns its storage or views another's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace rlcpp {

// The one precision type (docs/architecture.md "Numerics"): what a tensor holds, what a role computes in, how a packed
// weight stores its values and what arithmetic a product runs in.
//   kF32, kBF16, kF16   floating-point storage and math
//   kTF32               a math mode, not a storage format: fp32 values whose products run on CUDA tensor cores
//                       with TF32 operands (a tensor never holds it; a role or a product may compute in it)
//   kInt8, kFp8E4M3     weight-only quantised codes, one byte each, with a scale per output channel beside them
//                       (int8: q = round(w / s) in [-127, 127], s = max |w| / 127; e4m3: q = e4m3(w / s),
//                       s = max |w| / 448)
//   kI32, kI64, kU8     integers: ids, positions, tables, bytes
enum class DType { kF32, kF16, kBF16, kI32, kI64, kU8, kTF32, kInt8, kFp8E4M3 };
enum class Device { kCPU, kCUDA };

// Bytes of one element as stored (kTF32: an fp32 value's 4).
size_t dtype_size(DType dtype);
// Safetensors' spelling where it has one: "F32", "BF16", "F16", "I8", "F8_E4M3", "I32", "I64", "U8"; "TF32".
const char* dtype_name(DType dtype);
// The configs' spelling: "fp32", "tf32", "bf16", "fp16", "int8", "fp8_e4m3" (dtype_name for the integer types).
const char* precision_name(DType dtype);
// The DType whose precision_name is `name` ("fp32", "tf32", "bf16", "fp16", "int8", "fp8_e4m3"); false for any other.
bool parse_precision(const std::string& name, DType* dtype);
// A weight-only quantised format (int8, fp8_e4m3): codes and channel scales.
inline bool is_quantized(DType dtype) { return dtype == DType::kInt8 || dtype == DType::kFp8E4M3; }
// The floating-point storage dtypes (F32, BF16, F16): what values are rounded to and stored as (ops round_to,
// stored_as), what a KV cache and a checkpoint hold.
inline bool is_float_storage(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}
// The floating-point storage a tensor of this math holds (kTF32: kF32; a floating dtype itself).
inline DType storage_dtype(DType dtype) { return dtype == DType::kTF32 ? DType::kF32 : dtype; }
const char* device_name(Device device);

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Host memory of its own (64-byte aligned). Device tensors come from an ExecContext (core/exec_context.h).
  static Tensor empty(Shape shape, DType dtype = DType::kF32, Device device = Device::kCPU);
  static Tensor zeros(Shape shape, DType dtype = DType::kF32, Device device = Device::kCPU);
  // A view of caller-owned memory; the caller keeps it alive.
  static Tensor borrow(void* data, Shape shape, DType dtype = DType::kF32, Device device = Device::kCPU);
  // A tensor owning `storage` (at least nbytes() on `device`, e.g. from an ExecContext's pool).
  static Tensor from_storage(std::shared_ptr<void> storage, Shape shape, DType dtype, Device device);

  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t axis) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  // In host memory: the CPU reads it in place (code above core/ asks this, not which device it is on).
  bool on_host() const { return device_ == Device::kCPU; }
  bool defined() const { return data_ != nullptr; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T> T* data() { return static_cast<T*>(data_); }
  template <class T> const T* data() const { return static_cast<const T*>(data_); }

  // Same storage, new shape with the same number of elements.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the leading axis, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  void fill_zero();
  Tensor clone() const;

 private:
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCPU;
};

}  // namespace rlcpp
