// Shape, dtype and device checks for every op of ops.h, and its one dispatch point: on a CPU context fp32
// tensors run kernels/cpu/, on a CUDA context kernels/cuda/ on the context's stream and cuBLAS handle (a CPU-only
// build cannot make one: ExecContext::cuda throws "built without CUDA"); a tensor on another device than the
// context's, or of another dtype, is an error naming it.
// Index tensors (ids, positions, cu_seqlens, block tables) are range-checked (op_checks.h) on the CPU path;
// on CUDA they live on the device and are not read back.
#include "kernels/ops.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op_checks.h"
#include "kernels/temperature.h"
#ifdef RLCPP_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace rlcpp::ops {
namespace {

// The dispatch point. Checks that every tensor is defined and sits on the context's device, the float ones F32
// and the index ones I32; returns true when the op runs on CUDA.
bool runs_on_cuda(const ExecContext& ctx, const char* op, std::initializer_list<Arg> floats,
                  std::initializer_list<Arg> indices = {}) {
  const Device device = ctx.device();
  for (const auto* list : {&floats, &indices}) {
    for (const Arg& a : *list) {
      RLCPP_CHECK(a.t->defined(), op << ": " << a.name << " is an undefined tensor");
      RLCPP_CHECK(a.t->device() == device, op << ": " << a.name << " is on " << device_name(a.t->device())
                                              << " but the op runs on " << ctx.name());
    }
  }
  for (const Arg& a : floats)
    RLCPP_CHECK(a.t->dtype() == DType::kF32,
                "op " << op << ": dtype " << dtype_name(a.t->dtype()) << " not supported on " << device_name(device)
                      << " (" << a.name << ")");
  for (const Arg& a : indices)
    RLCPP_CHECK(a.t->dtype() == DType::kI32,
                op << ": " << a.name << " must be I32, got " << dtype_name(a.t->dtype()));
  return device == Device::kCUDA;
}

#ifdef RLCPP_WITH_CUDA
// The CUDA arm's status checks; the kernels return the status, this layer throws with file:line.
void check_cuda_status(cudaError_t status, const char* op, const char* file, int line) {
  if (status != cudaSuccess)
    detail::throw_error(file, line, std::string("op ") + op + ": CUDA error " + cudaGetErrorName(status) + ": " +
                                        cudaGetErrorString(status));
}
void check_cuda_status(cublasStatus_t status, const char* op, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    detail::throw_error(file, line, std::string("op ") + op + ": cuBLAS error " + cublasGetStatusString(status));
}
// The context's stream and cuBLAS handle (opaque in core/exec_context.h).
cudaStream_t stream_of(const ExecContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }
cublasHandle_t blas_of(const ExecContext& ctx) { return static_cast<cublasHandle_t>(ctx.blas_handle()); }
#define RLCPP_CUDA_ARM(op, call) check_cuda_status((call), (op), __FILE__, __LINE__)
#else
// runs_on_cuda has already thrown "built without CUDA", so the call is never needed.
#define RLCPP_CUDA_ARM(op, call) ((void)0)
#endif

// A host tensor for an op that computes on the host what it returns on ctx's device: from ctx's pool on the
// CPU, a transfer buffer otherwise; on_device_of then moves it to ctx's device.
Tensor host_buffer(const ExecContext& ctx, Shape shape) {
  return ctx.device() == Device::kCPU ? ctx.empty(std::move(shape)) : Tensor::empty(std::move(shape));
}
Tensor on_device_of(const ExecContext& ctx, const Tensor& host) {
  return ctx.device() == Device::kCPU ? host : ctx.copy_of(host);
}

[[noreturn]] void no_cuda_kernel(const char* op) { RLCPP_FAIL("op " << op << " has no CUDA kernel yet"); }
// cu_seqlens on the device: its shape is checked, not its values (they are not read back).
void expect_device_cu_seqlens(const char* op, const Tensor& cu_seqlens) {
  RLCPP_CHECK(cu_seqlens.dim() == 1 && cu_seqlens.numel() >= 2,
              op << ": cu_seqlens has shape " << shape_str(cu_seqlens.shape()) << ", expected (B+1) with B >= 1");
}
#ifdef RLCPP_WITH_CUDA
cuda::FloatDtype cuda_float_dtype(DType dtype) {
  return dtype == DType::kBF16 ? cuda::FloatDtype::kBF16
         : dtype == DType::kF16 ? cuda::FloatDtype::kF16
                                : cuda::FloatDtype::kF32;
}
void check_cuda_head_dim(const char* op, int64_t d) {
  RLCPP_CHECK(d <= cuda::kMaxAttentionHeadDim,
              op << ": head_dim " << d << " above the CUDA kernel's " << cuda::kMaxAttentionHeadDim);
}
#endif

}  // namespace

const char* matmul_math_name(MatmulMath math) {
  switch (math) {
    case MatmulMath::kF32: return "f32";
    case MatmulMath::kTF32: return "tf32";
    case MatmulMath::kBF16: return "bf16";
    case MatmulMath::kF16: return "f16";
  }
  return "?";
}

#ifdef RLCPP_WITH_CUDA
namespace {
cublasComputeType_t cublas_compute(MatmulMath math) {
  switch (math) {
    case MatmulMath::kF32: return CUBLAS_COMPUTE_32F;
    case MatmulMath::kTF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case MatmulMath::kBF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case MatmulMath::kF16: return CUBLAS_COMPUTE_32F_FAST_16F;
  }
  return CUBLAS_COMPUTE_32F;
}
}  // namespace
#endif

void matmul(const ExecContext& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
            float alpha, float beta, MatmulMath math) {
  const char* op = "matmul";
  const bool cuda = runs_on_cuda(ctx, op, {{"a", &a}, {"b", &b}, {"c", &c}});
  RLCPP_CHECK(cuda || math == MatmulMath::kF32, op << ": " << matmul_math_name(math)
                                                   << " math runs on CUDA only (the CPU's bf16 and fp16 products are "
                                                      "matmul_packed's)");
  expect_rank(op, {"a", &a}, 2, "(M,K)");
  expect_rank(op, {"b", &b}, 2, "(K,N)");
  expect_rank(op, {"c", &c}, 2, "(M,N)");
  const int64_t m = trans_a ? a.size(1) : a.size(0);
  const int64_t k = trans_a ? a.size(0) : a.size(1);
  const int64_t kb = trans_b ? b.size(1) : b.size(0);
  const int64_t n = trans_b ? b.size(0) : b.size(1);
  RLCPP_CHECK(k == kb, op << ": a " << shape_str(a.shape()) << " and b " << shape_str(b.shape())
                          << " do not agree on K (" << k << " vs " << kb << ", trans_a=" << trans_a
                          << ", trans_b=" << trans_b << ")");
  expect_shape(op, {"c", &c}, {m, n});
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::matmul(blas_of(ctx), a.data<float>(), trans_a, b.data<float>(), trans_b, c.data<float>(),
                                    m, n, k, alpha, beta, cublas_compute(math), stream_of(ctx)));
    return;
  }
  cpu::matmul(a.data<float>(), trans_a, b.data<float>(), trans_b, c.data<float>(), m, n, k, alpha, beta);
}

namespace {

DType panel_dtype(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return DType::kF32;
    case WeightFormat::kBF16: return DType::kBF16;
    case WeightFormat::kF16: return DType::kF16;
    case WeightFormat::kInt8:
    case WeightFormat::kFp8E4M3: return DType::kU8;
  }
  return DType::kF32;
}

// Sizes packed.panels (and scales) for `n` outputs of `k` inputs in `format`, reusing the buffers when they fit,
// and records the shape.
void shape_packed(const ExecContext& ctx, PackedWeight& packed, int64_t n, int64_t k, WeightFormat format) {
  const int64_t num_panels = (n + cpu::kPackedPanel - 1) / cpu::kPackedPanel;
  const Shape shape{num_panels, cpu::panel_depth(format, k), cpu::kPackedPanel};
  const DType dtype = panel_dtype(format);
  if (!packed.panels.defined() || packed.panels.shape() != shape || packed.panels.dtype() != dtype ||
      packed.panels.device() != ctx.device())
    packed.panels = ctx.empty(shape, dtype);
  if (is_quantized(format)) {
    RLCPP_CHECK(ctx.device() == Device::kCPU, "pack_weight: quantised panels are packed on the host");
    if (!packed.scales.defined() || packed.scales.numel() != num_panels * cpu::kPackedPanel)
      packed.scales = ctx.empty({num_panels * cpu::kPackedPanel});
    float* scales = packed.scales.data<float>();
    std::fill(scales + n, scales + packed.scales.numel(), 1.0f);  // the padding columns (their panels are 0)
  } else {
    packed.scales = Tensor();
  }
  packed.n = n;
  packed.k = k;
  packed.format = format;
}

}  // namespace

void pack_weight(const ExecContext& ctx, const Tensor& w, PackedWeight& packed, WeightFormat format) {
  const char* op = "pack_weight";
  const bool cuda = runs_on_cuda(ctx, op, {{"w", &w}});
  expect_rank(op, {"w", &w}, 2, "(N,K)");
  if (cuda && is_quantized(format)) {
    // A rollout's quantisation, once per policy version: the channel scales and codes of the CPU's reference,
    // packed on the host and moved.
    Tensor w_host = Tensor::empty(w.shape());
    ctx.copy(w, w_host);
    PackedWeight host;
    pack_weight(ExecContext::cpu(), w_host, host, format);
    copy_packed(ctx, host, packed);
    return;
  }
  shape_packed(ctx, packed, w.size(0), w.size(1), format);
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::pack_weight(w.data<float>(), packed.panels.raw(), format, w.size(0), w.size(1),
                                         packed.panels.size(1), stream_of(ctx)));
    return;
  }
  cpu::pack_weight(w.data<float>(), packed.panels.raw(), packed.scales.defined() ? packed.scales.data<float>() : nullptr,
                   w.size(0), w.size(1), format);
}

void copy_packed(const ExecContext& ctx, const PackedWeight& src, PackedWeight& dst) {
  RLCPP_CHECK(src.panels.defined(), "copy_packed: the source packed weight is empty");
  auto copy_into = [&](const Tensor& from, Tensor& to) {
    if (!from.defined()) {
      to = Tensor();
      return;
    }
    if (!to.defined() || to.shape() != from.shape() || to.dtype() != from.dtype() || to.device() != ctx.device())
      to = ctx.empty(from.shape(), from.dtype());
    ctx.copy(from, to);
  };
  copy_into(src.panels, dst.panels);
  copy_into(src.scales, dst.scales);
  dst.n = src.n;
  dst.k = src.k;
  dst.format = src.format;
}

Tensor unpack_weight(const ExecContext& ctx, const PackedWeight& packed) {
  RLCPP_CHECK(packed.panels.defined() && packed.panels.device() == Device::kCPU,
              "unpack_weight: the packed weight is empty or not on the CPU");
  Tensor w = host_buffer(ctx, {packed.n, packed.k});
  cpu::unpack_weight(packed.panels.raw(), packed.scales.defined() ? packed.scales.data<float>() : nullptr,
                     w.data<float>(), packed.n, packed.k, packed.format);
  return on_device_of(ctx, w);
}

void pack_weight_transposed(const ExecContext& ctx, const Tensor& w, PackedWeight& packed) {
  const char* op = "pack_weight_transposed";
  if (runs_on_cuda(ctx, op, {{"w", &w}})) no_cuda_kernel(op);
  expect_rank(op, {"w", &w}, 2, "(N,K)");
  shape_packed(ctx, packed, w.size(1), w.size(0), WeightFormat::kF32);
  cpu::pack_weight_transposed(w.data<float>(), packed.panels.data<float>(), w.size(0), w.size(1));
}

namespace {

// Returns true when the product runs on CUDA.
bool check_packed_product(const ExecContext& ctx, const char* op, const Tensor& x, const PackedWeight& w,
                          const Tensor& y, DType round) {
  const bool cuda = runs_on_cuda(ctx, op, {{"x", &x}, {"y", &y}});
  RLCPP_CHECK(w.panels.defined() && w.panels.device() == ctx.device() && w.panels.dtype() == panel_dtype(w.format),
              op << ": the packed weight is empty, not on " << ctx.name() << ", or not in its format "
                 << weight_format_name(w.format));
  RLCPP_CHECK(!w.scales.defined() || w.scales.device() == ctx.device(),
              op << ": the packed weight's scales are not on " << ctx.name());
  RLCPP_CHECK(!is_quantized(w.format) || w.scales.numel() == w.panels.size(0) * cpu::kPackedPanel,
              op << ": the " << weight_format_name(w.format) << " packed weight has no channel scales");
  RLCPP_CHECK(round == DType::kF32 || round == DType::kBF16 || round == DType::kF16,
              op << ": cannot round outputs to " << dtype_name(round) << " (F32, BF16 or F16)");
  expect_rank(op, {"x", &x}, 2, "(M,K)");
  expect_shape(op, {"w.panels", &w.panels},
               {(w.n + cpu::kPackedPanel - 1) / cpu::kPackedPanel, cpu::panel_depth(w.format, w.k), cpu::kPackedPanel});
  RLCPP_CHECK(x.size(1) == w.k, op << ": x " << shape_str(x.shape()) << " has K = " << x.size(1)
                                   << " but the packed weight is (" << w.n << "," << w.k << ")");
  expect_shape(op, {"y", &y}, {x.size(0), w.n});
  return cuda;
}

const float* scales_of(const PackedWeight& w) { return w.scales.defined() ? w.scales.data<float>() : nullptr; }

#ifdef RLCPP_WITH_CUDA
cudaError_t cuda_packed_product(const ExecContext& ctx, const Tensor& x, const PackedWeight& w, Tensor& y,
                                const float* residual, DType round) {
  return cuda::matmul_packed(x.data<float>(), w.panels.raw(), scales_of(w), w.format, y.data<float>(), x.size(0), w.n,
                             w.k, w.panels.size(1), residual, cuda_float_dtype(round), stream_of(ctx));
}
#endif

}  // namespace

void matmul_packed(const ExecContext& ctx, const Tensor& x, const PackedWeight& w, Tensor& y, bool accumulate,
                   DType round) {
  const char* op = "matmul_packed";
  if (check_packed_product(ctx, op, x, w, y, round)) {
    RLCPP_CUDA_ARM(op, cuda_packed_product(ctx, x, w, y, accumulate ? y.data<float>() : nullptr, round));
    return;
  }
  cpu::matmul_packed(x.data<float>(), w.panels.raw(), scales_of(w), w.format, y.data<float>(), x.size(0), w.n, w.k,
                     accumulate ? y.data<float>() : nullptr, round);
}

void matmul_packed_residual(const ExecContext& ctx, const Tensor& x, const PackedWeight& w, const Tensor& residual,
                            Tensor& y, DType round) {
  const char* op = "matmul_packed_residual";
  const bool cuda = check_packed_product(ctx, op, x, w, y, round);
  runs_on_cuda(ctx, op, {{"residual", &residual}});
  expect_shape(op, {"residual", &residual}, y.shape());
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda_packed_product(ctx, x, w, y, residual.data<float>(), round));
    return;
  }
  cpu::matmul_packed(x.data<float>(), w.panels.raw(), scales_of(w), w.format, y.data<float>(), x.size(0), w.n, w.k,
                     residual.data<float>(), round);
}

void round_to(const ExecContext& ctx, Tensor& x, DType dtype) {
  const char* op = "round_to";
  if (dtype == DType::kF32) return;
  RLCPP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16,
              op << ": cannot round to " << dtype_name(dtype) << " (F32, BF16 or F16)");
  if (runs_on_cuda(ctx, op, {{"x", &x}})) {
    RLCPP_CUDA_ARM(op, cuda::round_to(x.data<float>(), x.numel(), cuda_float_dtype(dtype), stream_of(ctx)));
    return;
  }
  cpu::round_to(x.data<float>(), x.numel(), dtype);
}

Tensor stored_as(const ExecContext& ctx, const Tensor& x, DType dtype) {
  const char* op = "stored_as";
  RLCPP_CHECK(x.dtype() == DType::kF32, op << ": x must be F32, got " << dtype_name(x.dtype()));
  if (runs_on_cuda(ctx, op, {{"x", &x}})) no_cuda_kernel(op);
  if (dtype == DType::kF32) return x.clone();
  RLCPP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16,
              op << ": cannot store as " << dtype_name(dtype) << " (F32, BF16 or F16)");
  Tensor out = ctx.empty(x.shape(), dtype);
  cpu::store_as(x.data<float>(), x.numel(), dtype, out.data<uint16_t>());
  return out;
}

void linear_weight_grad(const ExecContext& ctx, const Tensor& dy, const Tensor& x, Tensor& dw, MatmulMath math) {
  const char* op = "linear_weight_grad";
  const bool cuda = runs_on_cuda(ctx, op, {{"dy", &dy}, {"x", &x}, {"dw", &dw}});
  RLCPP_CHECK(cuda || math == MatmulMath::kF32, op << ": " << matmul_math_name(math)
                                                   << " math is a tensor-core mode of CUDA; the CPU computes in f32");
  expect_rank(op, {"dy", &dy}, 2, "(M,N)");
  expect_rank(op, {"x", &x}, 2, "(M,K)");
  RLCPP_CHECK(dy.size(0) == x.size(0), op << ": dy " << shape_str(dy.shape()) << " and x " << shape_str(x.shape())
                                          << " have different row counts");
  expect_shape(op, {"dw", &dw}, {dy.size(1), x.size(1)});
  if (cuda) {
    matmul(ctx, dy, true, x, false, dw, 1.0f, 1.0f, math);
    return;
  }
  cpu::linear_weight_grad(dy.data<float>(), x.data<float>(), dw.data<float>(), dy.size(0), dy.size(1), x.size(1));
}

void add_bias(const ExecContext& ctx, Tensor& y, const Tensor& bias) {
  const char* op = "add_bias";
  const bool cuda = runs_on_cuda(ctx, op, {{"y", &y}, {"bias", &bias}});
  expect_rank(op, {"y", &y}, 2, "(M,N)");
  expect_shape(op, {"bias", &bias}, {y.size(1)});
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::add_bias(y.data<float>(), bias.data<float>(), y.size(0), y.size(1), stream_of(ctx)));
    return;
  }
  cpu::add_bias(y.data<float>(), bias.data<float>(), y.size(0), y.size(1));
}

void bias_backward(const ExecContext& ctx, const Tensor& dy, Tensor& dbias) {
  const char* op = "bias_backward";
  const bool cuda = runs_on_cuda(ctx, op, {{"dy", &dy}, {"dbias", &dbias}});
  expect_rank(op, {"dy", &dy}, 2, "(M,N)");
  expect_shape(op, {"dbias", &dbias}, {dy.size(1)});
  if (cuda) {
    RLCPP_CUDA_ARM(op,
                   cuda::bias_backward(dy.data<float>(), dbias.data<float>(), dy.size(0), dy.size(1), stream_of(ctx)));
    return;
  }
  cpu::bias_backward(dy.data<float>(), dbias.data<float>(), dy.size(0), dy.size(1));
}

void add_inplace(const ExecContext& ctx, Tensor& x, const Tensor& y) {
  const char* op = "add_inplace";
  const bool cuda = runs_on_cuda(ctx, op, {{"x", &x}, {"y", &y}});
  expect_shape(op, {"y", &y}, x.shape());
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::add_inplace(x.data<float>(), y.data<float>(), x.numel(), stream_of(ctx)));
    return;
  }
  cpu::add_inplace(x.data<float>(), y.data<float>(), x.numel());
}

void scale_inplace(const ExecContext& ctx, Tensor& x, float s) {
  const char* op = "scale_inplace";
  if (runs_on_cuda(ctx, op, {{"x", &x}})) {
    RLCPP_CUDA_ARM(op, cuda::scale_inplace(x.data<float>(), s, x.numel(), stream_of(ctx)));
    return;
  }
  cpu::scale_inplace(x.data<float>(), s, x.numel());
}

void embedding_forward(const ExecContext& ctx, const Tensor& table, const Tensor& ids, Tensor& out) {
  const char* op = "embedding_forward";
  const bool cuda = runs_on_cuda(ctx, op, {{"table", &table}, {"out", &out}}, {{"ids", &ids}});
  expect_rank(op, {"table", &table}, 2, "(V,C)");
  expect_rank(op, {"ids", &ids}, 1, "(N)");
  expect_shape(op, {"out", &out}, {ids.size(0), table.size(1)});
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::embedding_forward(table.data<float>(), ids.data<int32_t>(), out.data<float>(), ids.size(0),
                                               table.size(0), table.size(1), stream_of(ctx)));
    return;
  }
  expect_indices_in(op, {"ids", &ids}, 0, table.size(0));
  cpu::embedding_forward(table.data<float>(), ids.data<int32_t>(), out.data<float>(), ids.size(0), table.size(1));
}

void embedding_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const char* op = "embedding_backward";
  const bool cuda = runs_on_cuda(ctx, op, {{"dout", &dout}, {"dtable", &dtable}}, {{"ids", &ids}});
  expect_rank(op, {"dtable", &dtable}, 2, "(V,C)");
  expect_rank(op, {"ids", &ids}, 1, "(N)");
  expect_shape(op, {"dout", &dout}, {ids.size(0), dtable.size(1)});
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::embedding_backward(dout.data<float>(), ids.data<int32_t>(), dtable.data<float>(),
                                                ids.size(0), dtable.size(0), dtable.size(1), stream_of(ctx)));
    return;
  }
  expect_indices_in(op, {"ids", &ids}, 0, dtable.size(0));
  cpu::embedding_backward(dout.data<float>(), ids.data<int32_t>(), dtable.data<float>(), ids.size(0),
                          dtable.size(1));
}

void rmsnorm_forward(const ExecContext& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                     Tensor& rstd, DType round) {
  const char* op = "rmsnorm_forward";
  const bool cuda = runs_on_cuda(ctx, op, {{"x", &x}, {"weight", &weight}, {"out", &out}, {"rstd", &rstd}});
  expect_rank(op, {"x", &x}, 2, "(N,C)");
  expect_shape(op, {"weight", &weight}, {x.size(1)});
  expect_shape(op, {"out", &out}, x.shape());
  expect_shape(op, {"rstd", &rstd}, {x.size(0)});
  RLCPP_CHECK(eps >= 0.0f, op << ": eps = " << eps << ", expected >= 0");
  RLCPP_CHECK(round == DType::kF32 || round == DType::kBF16 || round == DType::kF16,
              op << ": cannot round to " << dtype_name(round) << " (F32, BF16 or F16)");
  if (cuda) {
    RLCPP_CUDA_ARM(
        op, cuda::rmsnorm_forward(x.data<float>(), weight.data<float>(), eps, out.data<float>(), rstd.data<float>(),
                                  x.size(0), x.size(1), cuda_float_dtype(round), stream_of(ctx)));
    return;
  }
  cpu::rmsnorm_forward(x.data<float>(), weight.data<float>(), eps, out.data<float>(), rstd.data<float>(), x.size(0),
                       x.size(1), round);
}

void rmsnorm_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& x, const Tensor& weight,
                      const Tensor& rstd, Tensor& dx, Tensor& dweight) {
  const char* op = "rmsnorm_backward";
  const bool cuda = runs_on_cuda(
      ctx, op, {{"dout", &dout}, {"x", &x}, {"weight", &weight}, {"rstd", &rstd}, {"dx", &dx}, {"dweight", &dweight}});
  expect_rank(op, {"x", &x}, 2, "(N,C)");
  expect_shape(op, {"dout", &dout}, x.shape());
  expect_shape(op, {"weight", &weight}, {x.size(1)});
  expect_shape(op, {"rstd", &rstd}, {x.size(0)});
  expect_shape(op, {"dx", &dx}, x.shape());
  expect_shape(op, {"dweight", &dweight}, {x.size(1)});
  if (cuda) {
    RLCPP_CUDA_ARM(
        op, cuda::rmsnorm_backward(dout.data<float>(), x.data<float>(), weight.data<float>(), rstd.data<float>(),
                                   dx.data<float>(), dweight.data<float>(), x.size(0), x.size(1), stream_of(ctx)));
    return;
  }
  cpu::rmsnorm_backward(dout.data<float>(), x.data<float>(), weight.data<float>(), rstd.data<float>(),
                        dx.data<float>(), dweight.data<float>(), x.size(0), x.size(1));
}

Tensor rope_table(const ExecContext& ctx, int64_t max_positions, int64_t head_dim, float theta) {
  RLCPP_CHECK(max_positions > 0, "rope_table: max_positions = " << max_positions << ", expected > 0");
  RLCPP_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope_table: head_dim = " << head_dim << ", expected even and > 0");
  RLCPP_CHECK(theta > 0.0f, "rope_table: theta = " << theta << ", expected > 0");
  Tensor table = host_buffer(ctx, {max_positions, head_dim});
  cpu::rope_table(table.data<float>(), max_positions, head_dim, theta);
  return on_device_of(ctx, table);
}

namespace {
// rope_forward and rope_backward share their checks and differ only in the kernel they run.
template <class CpuKernel, class CudaKernel>
void rope_apply(const ExecContext& ctx, const char* op, Tensor& x, const Tensor& positions, const Tensor& table,
                CpuKernel cpu_kernel, CudaKernel cuda_kernel) {
  const bool cuda = runs_on_cuda(ctx, op, {{"x", &x}, {"table", &table}}, {{"positions", &positions}});
  expect_rank(op, {"x", &x}, 3, "(N,H,D)");
  expect_shape(op, {"positions", &positions}, {x.size(0)});
  expect_rank(op, {"table", &table}, 2, "(max_positions,D)");
  RLCPP_CHECK(table.size(1) == x.size(2), op << ": table " << shape_str(table.shape()) << " is for head_dim "
                                             << table.size(1) << " but x " << shape_str(x.shape()) << " has "
                                             << x.size(2));
  RLCPP_CHECK(x.size(2) % 2 == 0, op << ": head_dim " << x.size(2) << " is odd");
  if (cuda) {
    cuda_kernel();
    return;
  }
  expect_indices_in(op, {"positions", &positions}, 0, table.size(0));
  cpu_kernel(x.data<float>(), positions.data<int32_t>(), table.data<float>(), x.size(0), x.size(1), x.size(2));
}
}  // namespace

void rope_forward(const ExecContext& ctx, Tensor& x, const Tensor& positions, const Tensor& table) {
  const char* op = "rope_forward";
  rope_apply(ctx, op, x, positions, table, cpu::rope_forward, [&] {
    RLCPP_CUDA_ARM(op, cuda::rope_forward(x.data<float>(), positions.data<int32_t>(), table.data<float>(), x.size(0),
                                          x.size(1), x.size(2), stream_of(ctx)));
  });
}

void rope_backward(const ExecContext& ctx, Tensor& dx, const Tensor& positions, const Tensor& table) {
  const char* op = "rope_backward";
  rope_apply(ctx, op, dx, positions, table, cpu::rope_backward, [&] {
    RLCPP_CUDA_ARM(op, cuda::rope_backward(dx.data<float>(), positions.data<int32_t>(), table.data<float>(), dx.size(0),
                                           dx.size(1), dx.size(2), stream_of(ctx)));
  });
}

namespace {
// The shapes every split of the fused qkv product (and its merge) checks: q (N,Hq,D), k and v (N,Hkv,D), qkv
// (N, (Hq + 2 Hkv) D).
void check_qkv_shapes(const char* op, const Tensor& qkv, const char* qkv_name, const Tensor& q, const char* q_name,
                      const Tensor& k, const char* k_name, const Tensor& v, const char* v_name) {
  expect_rank(op, {q_name, &q}, 3, "(N,Hq,D)");
  expect_rank(op, {k_name, &k}, 3, "(N,Hkv,D)");
  expect_shape(op, {v_name, &v}, k.shape());
  RLCPP_CHECK(k.size(0) == q.size(0) && k.size(2) == q.size(2),
              op << ": " << k_name << " " << shape_str(k.shape()) << " does not match " << q_name << " "
                 << shape_str(q.shape()));
  expect_shape(op, {qkv_name, &qkv}, {q.size(0), (q.size(1) + 2 * k.size(1)) * q.size(2)});
}

// The checks rope_split_qkv and rope_backward_merge_qkv share: the shapes above, positions (N) inside the
// table (on the CPU), table (max_positions, D), D even. Returns true when the op runs on CUDA.
bool check_rope_qkv(const ExecContext& ctx, const char* op, const Tensor& qkv, const char* qkv_name, const Tensor& q,
                    const char* q_name, const Tensor& k, const char* k_name, const Tensor& v, const char* v_name,
                    const Tensor& positions, const Tensor& table) {
  const bool cuda =
      runs_on_cuda(ctx, op, {{qkv_name, &qkv}, {q_name, &q}, {k_name, &k}, {v_name, &v}, {"table", &table}},
                   {{"positions", &positions}});
  check_qkv_shapes(op, qkv, qkv_name, q, q_name, k, k_name, v, v_name);
  const int64_t n = q.size(0), d = q.size(2);
  expect_shape(op, {"positions", &positions}, {n});
  expect_rank(op, {"table", &table}, 2, "(max_positions,D)");
  RLCPP_CHECK(table.size(1) == d, op << ": table " << shape_str(table.shape()) << " is for head_dim " << table.size(1)
                                     << " but " << q_name << " " << shape_str(q.shape()) << " has " << d);
  RLCPP_CHECK(d % 2 == 0, op << ": head_dim " << d << " is odd");
  if (!cuda) expect_indices_in(op, {"positions", &positions}, 0, table.size(0));
  return cuda;
}
}  // namespace

void rope_split_qkv(const ExecContext& ctx, const Tensor& qkv, const Tensor& positions, const Tensor& table, Tensor& q,
                    Tensor& k, Tensor& v) {
  const char* op = "rope_split_qkv";
  if (check_rope_qkv(ctx, op, qkv, "qkv", q, "q", k, "k", v, "v", positions, table)) {
    RLCPP_CUDA_ARM(op, cuda::rope_split_qkv(qkv.data<float>(), positions.data<int32_t>(), table.data<float>(),
                                            q.data<float>(), k.data<float>(), v.data<float>(), q.size(0), q.size(1),
                                            k.size(1), q.size(2), stream_of(ctx)));
    return;
  }
  cpu::rope_split_qkv(qkv.data<float>(), positions.data<int32_t>(), table.data<float>(), q.data<float>(),
                      k.data<float>(), v.data<float>(), q.size(0), q.size(1), k.size(1), q.size(2));
}

void rope_backward_merge_qkv(const ExecContext& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& positions, const Tensor& table, Tensor& dqkv) {
  const char* op = "rope_backward_merge_qkv";
  if (check_rope_qkv(ctx, op, dqkv, "dqkv", dq, "dq", dk, "dk", dv, "dv", positions, table)) {
    RLCPP_CUDA_ARM(op, cuda::rope_backward_merge_qkv(dq.data<float>(), dk.data<float>(), dv.data<float>(),
                                                     positions.data<int32_t>(), table.data<float>(), dqkv.data<float>(),
                                                     dq.size(0), dq.size(1), dk.size(1), dq.size(2), stream_of(ctx)));
    return;
  }
  cpu::rope_backward_merge_qkv(dq.data<float>(), dk.data<float>(), dv.data<float>(), positions.data<int32_t>(),
                               table.data<float>(), dqkv.data<float>(), dq.size(0), dq.size(1), dk.size(1),
                               dq.size(2));
}

void split_qkv(const ExecContext& ctx, const Tensor& qkv, Tensor& q, Tensor& k, Tensor& v) {
  const char* op = "split_qkv";
  const bool cuda = runs_on_cuda(ctx, op, {{"qkv", &qkv}, {"q", &q}, {"k", &k}, {"v", &v}});
  check_qkv_shapes(op, qkv, "qkv", q, "q", k, "k", v, "v");
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::split_qkv(qkv.data<float>(), q.data<float>(), k.data<float>(), v.data<float>(), q.size(0),
                                       q.size(1), k.size(1), q.size(2), stream_of(ctx)));
    return;
  }
  cpu::split_qkv(qkv.data<float>(), q.data<float>(), k.data<float>(), v.data<float>(), q.size(0), q.size(1),
                 k.size(1), q.size(2));
}

void merge_qkv(const ExecContext& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, Tensor& dqkv) {
  const char* op = "merge_qkv";
  const bool cuda = runs_on_cuda(ctx, op, {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}, {"dqkv", &dqkv}});
  check_qkv_shapes(op, dqkv, "dqkv", dq, "dq", dk, "dk", dv, "dv");
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::merge_qkv(dq.data<float>(), dk.data<float>(), dv.data<float>(), dqkv.data<float>(),
                                       dq.size(0), dq.size(1), dk.size(1), dq.size(2), stream_of(ctx)));
    return;
  }
  cpu::merge_qkv(dq.data<float>(), dk.data<float>(), dv.data<float>(), dqkv.data<float>(), dq.size(0), dq.size(1),
                 dk.size(1), dq.size(2));
}

void attention_forward(const ExecContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, float scale, Tensor& out, Tensor& lse) {
  const char* op = "attention_forward";
  const bool cuda = runs_on_cuda(ctx, op, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"lse", &lse}},
                                 {{"cu_seqlens", &cu_seqlens}});
  const AttentionDims dims = attention_dims(op, q, k, v);
  expect_shape(op, {"out", &out}, q.shape());
  expect_shape(op, {"lse", &lse}, {dims.n, dims.hq});
  if (cuda) {
    expect_device_cu_seqlens(op, cu_seqlens);
#ifdef RLCPP_WITH_CUDA
    check_cuda_head_dim(op, dims.d);
    RLCPP_CUDA_ARM(
        op, cuda::attention_forward(q.data<float>(), k.data<float>(), v.data<float>(), cu_seqlens.data<int32_t>(),
                                    cu_seqlens.numel() - 1, dims.n, dims.hq, dims.hkv, dims.d, scale, out.data<float>(),
                                    lse.data<float>(), stream_of(ctx)));
#endif
    return;
  }
  expect_cu_seqlens(op, cu_seqlens, dims.n);
  cpu::attention_forward(q.data<float>(), k.data<float>(), v.data<float>(), cu_seqlens.data<int32_t>(),
                         cu_seqlens.numel() - 1, dims.hq, dims.hkv, dims.d, scale, out.data<float>(),
                         lse.data<float>());
}

void attention_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  const char* op = "attention_backward";
  const bool cuda = runs_on_cuda(ctx, op,
                                 {{"dout", &dout},
                                  {"q", &q},
                                  {"k", &k},
                                  {"v", &v},
                                  {"out", &out},
                                  {"lse", &lse},
                                  {"dq", &dq},
                                  {"dk", &dk},
                                  {"dv", &dv}},
                                 {{"cu_seqlens", &cu_seqlens}});
  const AttentionDims dims = attention_dims(op, q, k, v);
  expect_shape(op, {"dout", &dout}, q.shape());
  expect_shape(op, {"out", &out}, q.shape());
  expect_shape(op, {"lse", &lse}, {dims.n, dims.hq});
  expect_shape(op, {"dq", &dq}, q.shape());
  expect_shape(op, {"dk", &dk}, k.shape());
  expect_shape(op, {"dv", &dv}, k.shape());
  if (cuda) {
    expect_device_cu_seqlens(op, cu_seqlens);
#ifdef RLCPP_WITH_CUDA
    check_cuda_head_dim(op, dims.d);
    RLCPP_CUDA_ARM(op, cuda::attention_backward(dout.data<float>(), q.data<float>(), k.data<float>(), v.data<float>(),
                                                out.data<float>(), lse.data<float>(), cu_seqlens.data<int32_t>(),
                                                cu_seqlens.numel() - 1, dims.n, dims.hq, dims.hkv, dims.d, scale,
                                                dq.data<float>(), dk.data<float>(), dv.data<float>(), stream_of(ctx)));
#endif
    return;
  }
  expect_cu_seqlens(op, cu_seqlens, dims.n);
  cpu::attention_backward(dout.data<float>(), q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
                          lse.data<float>(), cu_seqlens.data<int32_t>(), cu_seqlens.numel() - 1, dims.hq, dims.hkv,
                          dims.d, scale, dq.data<float>(), dk.data<float>(), dv.data<float>());
}

namespace {

// The KV cache's storage dtype (F32, BF16, F16), checked; both caches the same and on the op's device.
DType kv_cache_dtype(const char* op, const Tensor& k_cache, const Tensor& v_cache, bool cuda) {
  RLCPP_CHECK(k_cache.defined() && v_cache.defined(), op << ": a KV cache tensor is undefined");
  const Device device = cuda ? Device::kCUDA : Device::kCPU;
  RLCPP_CHECK(k_cache.device() == device && v_cache.device() == device,
              op << ": the KV cache is on " << device_name(k_cache.device()) << " / " << device_name(v_cache.device())
                 << " but the op's tensors on " << device_name(device));
  const DType dtype = k_cache.dtype();
  RLCPP_CHECK(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
              op << ": KV cache dtype " << dtype_name(dtype) << " not supported (F32, BF16 or F16)");
  RLCPP_CHECK(v_cache.dtype() == dtype, op << ": k_cache is " << dtype_name(dtype) << " but v_cache is "
                                           << dtype_name(v_cache.dtype()));
  return dtype;
}


}  // namespace

void paged_kv_write(const ExecContext& ctx, const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                    Tensor& k_cache, Tensor& v_cache) {
  const char* op = "paged_kv_write";
  const bool cuda = runs_on_cuda(ctx, op, {{"k", &k}, {"v", &v}}, {{"slot_mapping", &slot_mapping}});
  const DType dtype = kv_cache_dtype(op, k_cache, v_cache, cuda);
  expect_rank(op, {"k", &k}, 3, "(N,Hkv,D)");
  expect_shape(op, {"v", &v}, k.shape());
  expect_shape(op, {"slot_mapping", &slot_mapping}, {k.size(0)});
  expect_rank(op, {"k_cache", &k_cache}, 3, "(num_slots,Hkv,D)");
  expect_shape(op, {"k_cache", &k_cache}, {k_cache.size(0), k.size(1), k.size(2)});
  expect_shape(op, {"v_cache", &v_cache}, k_cache.shape());
  if (cuda) {  // slot_mapping lives on the device: not range-checked
    RLCPP_CUDA_ARM(op, cuda::paged_kv_write(k.data<float>(), v.data<float>(), slot_mapping.data<int32_t>(), k.size(0),
                                            k.size(1) * k.size(2), k_cache.raw(), v_cache.raw(),
                                            cuda_float_dtype(dtype), stream_of(ctx)));
    return;
  }
  expect_indices_in(op, {"slot_mapping", &slot_mapping}, -1, k_cache.size(0));
  cpu::paged_kv_write(k.data<float>(), v.data<float>(), slot_mapping.data<int32_t>(), k.size(0),
                      k.size(1) * k.size(2), k_cache.raw(), v_cache.raw(), dtype);
}

void paged_attention(const ExecContext& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& query_seq, const Tensor& query_pos, const Tensor& block_indptr,
                     const Tensor& block_indices, int64_t block_size, float scale, Tensor& out) {
  const char* op = "paged_attention";
  const bool cuda = runs_on_cuda(ctx, op, {{"q", &q}, {"out", &out}},
                                 {{"query_seq", &query_seq},
                                  {"query_pos", &query_pos},
                                  {"block_indptr", &block_indptr},
                                  {"block_indices", &block_indices}});
  const DType dtype = kv_cache_dtype(op, k_cache, v_cache, cuda);
  expect_rank(op, {"q", &q}, 3, "(N,Hq,D)");
  expect_rank(op, {"k_cache", &k_cache}, 3, "(num_slots,Hkv,D)");
  const int64_t n = q.size(0), hq = q.size(1), d = q.size(2), hkv = k_cache.size(1);
  expect_shape(op, {"k_cache", &k_cache}, {k_cache.size(0), hkv, d});
  expect_shape(op, {"v_cache", &v_cache}, k_cache.shape());
  expect_shape(op, {"out", &out}, q.shape());
  expect_shape(op, {"query_seq", &query_seq}, {n});
  expect_shape(op, {"query_pos", &query_pos}, {n});
  expect_rank(op, {"block_indptr", &block_indptr}, 1, "(B+1)");
  expect_rank(op, {"block_indices", &block_indices}, 1, "(total blocks)");
  RLCPP_CHECK(block_indptr.numel() >= 1, op << ": block_indptr is empty; it needs B+1 entries");
  RLCPP_CHECK(hkv > 0 && hq % hkv == 0, op << ": query heads " << hq << " are not a multiple of kv heads " << hkv);
  RLCPP_CHECK(block_size > 0 && k_cache.size(0) % block_size == 0,
              op << ": block_size " << block_size << " does not divide the cache's " << k_cache.size(0) << " slots");
  if (cuda) {  // the block tables live on the device: not range-checked
#ifdef RLCPP_WITH_CUDA
    check_cuda_head_dim(op, d);
    RLCPP_CUDA_ARM(op, cuda::paged_attention(q.data<float>(), k_cache.raw(), v_cache.raw(), cuda_float_dtype(dtype),
                                             query_seq.data<int32_t>(), query_pos.data<int32_t>(),
                                             block_indptr.data<int32_t>(), block_indices.data<int32_t>(), block_size, n,
                                             hq, hkv, d, scale, out.data<float>(), stream_of(ctx)));
#endif
    return;
  }
  expect_paged_rows(op, query_seq, query_pos, block_indptr, block_indices, block_size,
                    k_cache.size(0) / block_size);
  cpu::paged_attention(q.data<float>(), k_cache.raw(), v_cache.raw(), dtype, query_seq.data<int32_t>(),
                       query_pos.data<int32_t>(), block_indptr.data<int32_t>(), block_indices.data<int32_t>(),
                       block_size, n, hq, hkv, d, scale, out.data<float>());
}

void swiglu_forward(const ExecContext& ctx, const Tensor& gate_up, Tensor& out) {
  const char* op = "swiglu_forward";
  const bool cuda = runs_on_cuda(ctx, op, {{"gate_up", &gate_up}, {"out", &out}});
  expect_rank(op, {"gate_up", &gate_up}, 2, "(N,2F)");
  RLCPP_CHECK(gate_up.size(1) % 2 == 0, op << ": gate_up " << shape_str(gate_up.shape()) << " has an odd width");
  const int64_t n = gate_up.size(0), f = gate_up.size(1) / 2;
  expect_shape(op, {"out", &out}, {n, f});
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::swiglu_forward(gate_up.data<float>(), out.data<float>(), n, f, stream_of(ctx)));
    return;
  }
  cpu::swiglu_forward(gate_up.data<float>(), out.data<float>(), n, f);
}

namespace {

// Checks swiglu_backward's operands (and act, when given); true when they are on CUDA.
bool check_swiglu_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, const Tensor& dgate_up,
                           const Tensor* act) {
  const char* op = "swiglu_backward";
  const Tensor& a = act ? *act : dout;  // dout stands in so the checks below stay uniform
  const bool cuda =
      runs_on_cuda(ctx, op, {{"dout", &dout}, {"gate_up", &gate_up}, {"dgate_up", &dgate_up}, {"act", &a}});
  expect_rank(op, {"gate_up", &gate_up}, 2, "(N,2F)");
  RLCPP_CHECK(gate_up.size(1) % 2 == 0, op << ": gate_up " << shape_str(gate_up.shape()) << " has an odd width");
  const int64_t n = gate_up.size(0), f = gate_up.size(1) / 2;
  expect_shape(op, {"dout", &dout}, {n, f});
  expect_shape(op, {"dgate_up", &dgate_up}, gate_up.shape());
  expect_shape(op, {"act", &a}, {n, f});
  return cuda;
}

}  // namespace

void swiglu_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up) {
  const int64_t n = gate_up.size(0), f = gate_up.size(1) / 2;
  if (check_swiglu_backward(ctx, dout, gate_up, dgate_up, nullptr)) {
    RLCPP_CUDA_ARM("swiglu_backward", cuda::swiglu_backward(dout.data<float>(), gate_up.data<float>(),
                                                            dgate_up.data<float>(), n, f, stream_of(ctx)));
    return;
  }
  cpu::swiglu_backward(dout.data<float>(), gate_up.data<float>(), dgate_up.data<float>(), nullptr, n, f);
}

void swiglu_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up, Tensor& act) {
  if (check_swiglu_backward(ctx, dout, gate_up, dgate_up, &act)) {
    swiglu_backward(ctx, dout, gate_up, dgate_up);
    swiglu_forward(ctx, gate_up, act);
    return;
  }
  cpu::swiglu_backward(dout.data<float>(), gate_up.data<float>(), dgate_up.data<float>(), act.data<float>(),
                       gate_up.size(0), gate_up.size(1) / 2);
}

void logprob_forward(const ExecContext& ctx, const Tensor& logits, const Tensor& targets, float temperature,
                     Tensor& logp, Tensor& lse, Tensor* entropy) {
  const char* op = "logprob_forward";
  const Tensor& ent = entropy ? *entropy : logp;  // logp stands in so the checks below stay uniform
  const bool cuda = runs_on_cuda(ctx, op, {{"logits", &logits}, {"logp", &logp}, {"lse", &lse}, {"entropy", &ent}},
                                 {{"targets", &targets}});
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"logp", &logp}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  expect_shape(op, {"entropy", &ent}, {n});
  check_temperature(temperature, op, /*zero_is_greedy=*/false);
  if (cuda) {  // targets live on the device: a bad one gives NaN (kernels/cuda/logprob_cuda.cu)
    RLCPP_CUDA_ARM(op, cuda::logprob_forward(logits.data<float>(), targets.data<int32_t>(), temperature,
                                             logp.data<float>(), lse.data<float>(),
                                             entropy ? entropy->data<float>() : nullptr, n, vocab, stream_of(ctx)));
    return;
  }
  expect_targets(op, targets, vocab);
  cpu::logprob_forward(logits.data<float>(), targets.data<int32_t>(), temperature, logp.data<float>(),
                       lse.data<float>(), entropy ? entropy->data<float>() : nullptr, n, vocab);
}

float row_logprob(const float* row, int64_t vocab_size, int32_t target, float temperature) {
  RLCPP_CHECK(target >= 0 && target < vocab_size, "row_logprob: target " << target << " outside the vocabulary of "
                                                                           << vocab_size);
  check_temperature(temperature, "row_logprob", /*zero_is_greedy=*/false);
  return cpu::row_logprob(row, target, temperature, vocab_size);
}

void logprob_backward(const ExecContext& ctx, const Tensor& dlogp, const Tensor* dentropy, const Tensor& logits,
                      const Tensor& targets, float temperature, const Tensor& lse, Tensor& dlogits) {
  const char* op = "logprob_backward";
  const Tensor& dent = dentropy ? *dentropy : dlogp;  // dlogp stands in so the checks below stay uniform
  const bool cuda = runs_on_cuda(
      ctx, op, {{"dlogp", &dlogp}, {"dentropy", &dent}, {"logits", &logits}, {"lse", &lse}, {"dlogits", &dlogits}},
      {{"targets", &targets}});
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"dlogp", &dlogp}, {n});
  expect_shape(op, {"dentropy", &dent}, {n});
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  expect_shape(op, {"dlogits", &dlogits}, logits.shape());
  check_temperature(temperature, op, /*zero_is_greedy=*/false);
  if (cuda) {
    RLCPP_CUDA_ARM(op, cuda::logprob_backward(dlogp.data<float>(), dentropy ? dentropy->data<float>() : nullptr,
                                              logits.data<float>(), targets.data<int32_t>(), temperature,
                                              lse.data<float>(), dlogits.data<float>(), n, vocab, stream_of(ctx)));
    return;
  }
  expect_targets(op, targets, vocab);
  cpu::logprob_backward(dlogp.data<float>(), dentropy ? dentropy->data<float>() : nullptr, logits.data<float>(),
                        targets.data<int32_t>(), temperature, lse.data<float>(), dlogits.data<float>(), n, vocab);
}

namespace {

void check_truncation(const char* op, const Truncation& t, float temperature) {
  RLCPP_CHECK(t.top_k >= 0 && t.top_p > 0.0f && t.top_p <= 1.0f,
              op << ": top_k " << t.top_k << " must be >= 0 and top_p " << t.top_p << " in (0, 1]");
  check_temperature(temperature, op, /*zero_is_greedy=*/false);
}

}  // namespace

void logprob_truncated_forward(const ExecContext& ctx, const Tensor& logits, const Tensor& targets, float temperature,
                               const Truncation& t, Tensor& logp, Tensor& lse) {
  const char* op = "logprob_truncated_forward";
  if (runs_on_cuda(ctx, op, {{"logits", &logits}, {"logp", &logp}, {"lse", &lse}}, {{"targets", &targets}}))
    no_cuda_kernel(op);
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"logp", &logp}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  check_truncation(op, t, temperature);
  expect_targets(op, targets, vocab);
  cpu::logprob_truncated_forward(logits.data<float>(), targets.data<int32_t>(), temperature, t, logp.data<float>(),
                                 lse.data<float>(), n, vocab);
}

void logprob_truncated_backward(const ExecContext& ctx, const Tensor& dlogp, const Tensor& logits,
                                const Tensor& targets, float temperature, const Truncation& t, const Tensor& lse,
                                Tensor& dlogits) {
  const char* op = "logprob_truncated_backward";
  if (runs_on_cuda(ctx, op, {{"dlogp", &dlogp}, {"logits", &logits}, {"lse", &lse}, {"dlogits", &dlogits}},
                   {{"targets", &targets}}))
    no_cuda_kernel(op);
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"dlogp", &dlogp}, {n});
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  expect_shape(op, {"dlogits", &dlogits}, logits.shape());
  check_truncation(op, t, temperature);
  expect_targets(op, targets, vocab);
  cpu::logprob_truncated_backward(dlogp.data<float>(), logits.data<float>(), targets.data<int32_t>(), temperature,
                                  t, lse.data<float>(), dlogits.data<float>(), n, vocab);
}

float row_logprob_truncated(const float* row, int64_t vocab_size, int32_t target, float temperature,
                            const Truncation& t, TruncationScratch& scratch) {
  RLCPP_CHECK(target >= 0 && target < vocab_size, "row_logprob_truncated: target " << target
                                                                                   << " outside the vocabulary of "
                                                                                   << vocab_size);
  check_truncation("row_logprob_truncated", t, temperature);
  return cpu::row_logprob_truncated(row, target, temperature, t, scratch, vocab_size, nullptr);
}

void adamw_step(const ExecContext& ctx, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p,
                int64_t step) {
  const char* op = "adamw_step";
  const bool cuda = runs_on_cuda(ctx, op, {{"param", &param}, {"grad", &grad}, {"m", &m}, {"v", &v}});
  expect_shape(op, {"grad", &grad}, param.shape());
  expect_shape(op, {"m", &m}, param.shape());
  expect_shape(op, {"v", &v}, param.shape());
  RLCPP_CHECK(step >= 1, op << ": step = " << step << ", expected >= 1 (steps count from 1)");
  RLCPP_CHECK(p.beta1 >= 0.0f && p.beta1 < 1.0f && p.beta2 >= 0.0f && p.beta2 < 1.0f,
              op << ": betas (" << p.beta1 << ", " << p.beta2 << ") must be in [0, 1)");
  if (cuda) {
    RLCPP_CUDA_ARM(
        op, cuda::adamw_step(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), param.numel(),
                             p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, step, stream_of(ctx)));
    return;
  }
  cpu::adamw_step(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), param.numel(), p.lr,
                  p.beta1, p.beta2, p.eps, p.weight_decay, step);
}

double l2_norm(const ExecContext& ctx, const Tensor& x) {
  const char* op = "l2_norm";
  if (runs_on_cuda(ctx, op, {{"x", &x}})) {
    double norm = 0.0;
    RLCPP_CUDA_ARM(op, cuda::l2_norm(x.data<float>(), x.numel(), &norm, stream_of(ctx)));
    return norm;
  }
  return cpu::l2_norm(x.data<float>(), x.numel());
}

bool all_finite(const ExecContext& ctx, const Tensor& x) {
  const char* op = "all_finite";
  if (runs_on_cuda(ctx, op, {{"x", &x}})) {
    bool finite = false;
    RLCPP_CUDA_ARM(op, cuda::all_finite(x.data<float>(), x.numel(), &finite, stream_of(ctx)));
    return finite;
  }
  return cpu::all_finite(x.data<float>(), x.numel());
}

uint64_t keyed_checksum(const ExecContext& ctx, const Tensor& x) {
  const char* op = "keyed_checksum";
  if (runs_on_cuda(ctx, op, {{"x", &x}})) {
    uint64_t sum = 0;
    RLCPP_CUDA_ARM(op, cuda::keyed_checksum(x.data<float>(), x.numel(), &sum, stream_of(ctx)));
    return sum;
  }
  return cpu::keyed_checksum(x.data<float>(), x.numel());
}

}  // namespace rlcpp::ops
