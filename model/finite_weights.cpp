#include "model/finite_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "kernels/ops.h"

namespace rlcpp {

int64_t first_non_finite(const float* x, int64_t n) {
  // The parallel reduction answers for the common, finite case; the scan that finds the element runs only on
  // failure.
  if (n == 0 || ops::all_finite(ExecContext::cpu(), Tensor::borrow(const_cast<float*>(x), {n}))) return -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return -1;
}

std::string NonFiniteWeight::describe() const {
  std::ostringstream os;
  os << "tensor '" << tensor << "' holds " << value << " at element " << index;
  return os.str();
}

std::optional<NonFiniteWeight> find_non_finite(const std::vector<ParameterInfo>& layout, const float* data) {
  // One pass over the whole span first: the tensors are looked at one by one only when it finds something.
  int64_t end = 0;
  for (const ParameterInfo& p : layout) end = std::max(end, p.offset + p.numel());
  if (first_non_finite(data, end) < 0) return std::nullopt;
  for (const ParameterInfo& p : layout) {
    const int64_t i = first_non_finite(data + p.offset, p.numel());
    if (i >= 0) return NonFiniteWeight{p.name, i, data[p.offset + i]};
  }
  return std::nullopt;
}

std::optional<NonFiniteWeight> find_non_finite(const ExecContext& ctx, const ParameterStore& params) {
  if (params.numel() == 0 || ops::all_finite(ctx, params.flat())) return std::nullopt;
  Tensor host;
  return find_non_finite(params.infos(), host_tensor(ctx, params.flat(), host).data<float>());
}

namespace {

// A bf16 value is nan or infinite when its exponent bits are all ones.
bool bf16_non_finite(uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u; }

// The first non-finite parameter of a store held in bf16 (a frozen LoRA base).
std::optional<NonFiniteWeight> find_non_finite_bf16(const ParameterStore& params) {
  const uint16_t* bits = params.flat().data<uint16_t>();
  bool any = false;  // one pass without an early exit (it vectorises), the tensors looked at only on failure
  for (int64_t i = 0; i < params.numel(); ++i) any |= bf16_non_finite(bits[i]);
  if (!any) return std::nullopt;
  for (const ParameterInfo& p : params.infos())
    for (int64_t i = 0; i < p.numel(); ++i)
      if (bf16_non_finite(bits[p.offset + i]))
        return NonFiniteWeight{p.name, i, std::bit_cast<float>(static_cast<uint32_t>(bits[p.offset + i]) << 16)};
  return std::nullopt;
}

}  // namespace

void check_finite_weights(const ParameterStore& params, const std::string& what) {
  RLCPP_CHECK(params.flat().on_host() || params.numel() == 0,
              what << ": checking weights on " << device_name(params.flat().device()) << " is not supported");
  if (params.dtype() == DType::kBF16) {
    if (const auto bad = find_non_finite_bf16(params)) RLCPP_FAIL(what << ": " << bad->describe());
    return;
  }
  if (const auto bad = find_non_finite(params.infos(), params.flat().data<float>()))
    RLCPP_FAIL(what << ": " << bad->describe());
}

}  // namespace rlcpp
