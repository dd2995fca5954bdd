#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace rlcpp {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kTF32: return 4;
    case DType::kInt8: return 1;
    case DType::kFp8E4M3: return 1;
  }
  RLCPP_FAIL("unknown dtype " << static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
    case DType::kTF32: return "TF32";
    case DType::kInt8: return "I8";
    case DType::kFp8E4M3: return "F8_E4M3";
  }
  return "?";
}

const char* precision_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kTF32: return "tf32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    case DType::kInt8: return "int8";
    case DType::kFp8E4M3: return "fp8_e4m3";
    default: return dtype_name(dtype);
  }
}

bool parse_precision(const std::string& name, DType* dtype) {
  for (DType d : {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16, DType::kInt8, DType::kFp8E4M3})
    if (name == precision_name(d)) {
      *dtype = d;
      return true;
    }
  return false;
}

const char* device_name(Device device) { return device == Device::kCPU ? "cpu" : "cuda"; }

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ")";
  return os.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    RLCPP_CHECK(d >= 0, "negative dimension in shape " << shape_str(shape));
    n *= d;
  }
  return n;
}

int64_t Tensor::size(int64_t axis) const {
  if (axis < 0) axis += dim();
  RLCPP_CHECK(axis >= 0 && axis < dim(), "axis " << axis << " out of range for shape " << shape_str(shape_));
  return shape_[axis];
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  RLCPP_CHECK(device == Device::kCPU, "Tensor::empty on " << device_name(device)
                                          << ": device tensors come from an ExecContext (ExecContext::empty)");
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  size_t bytes = t.nbytes();
  // 64-byte alignment for vector loads; at least one line so data() is never null.
  size_t padded = ((bytes + 63) / 64) * 64;
  if (padded == 0) padded = 64;
  void* p = std::aligned_alloc(64, padded);
  RLCPP_CHECK(p != nullptr, "out of memory allocating " << bytes << " bytes for tensor " << shape_str(t.shape_));
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.fill_zero();
  return t;
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.data_ = data;
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<void> storage, Shape shape, DType dtype, Device device) {
  RLCPP_CHECK(storage != nullptr, "Tensor::from_storage: no storage for " << shape_str(shape));
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.data_ = storage.get();
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  RLCPP_CHECK(shape_numel(shape) == numel(),
              "cannot reshape " << shape_str(shape_) << " to " << shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  RLCPP_CHECK(dim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0],
              "slice_rows [" << begin << ", " << end << ") out of range for shape " << shape_str(shape_));
  Tensor t = *this;
  int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

void Tensor::fill_zero() {
  RLCPP_CHECK(device_ == Device::kCPU, "fill_zero on a " << device_name(device_) << " tensor");
  if (nbytes()) std::memset(data_, 0, nbytes());
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

}  // namespace rlcpp
