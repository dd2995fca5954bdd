// Every op of ops.h: its shape, dtype and device checks, written once, and one dispatch into the context's backend
// (kernels/backend.h: "cpu", "cuda", "reference"), whose raw kernels have the same signature on every backend. A
// tensor on another device than the context's, of another dtype, or an (op, dtype) pair the backend does not
// support is an error naming it. Index tensors (ids, positions, cu_seqlens, block tables, targets) are
// range-checked (op_checks.h) where the backend reads host memory; a device's are checked for shape only.
#include "kernels/ops.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op_checks.h"
#include "kernels/temperature.h"

namespace rlcpp::ops {
namespace {

// What an op runs on, once its operands are checked.
struct Dispatch {
  const Backend& backend;
  KernelContext k;
  // Index tensors can be read (range-checked) before the call.
  bool host() const { return backend.reads_host_memory; }
};

// Each tensor defined and on the context's device, or an error naming it.
void expect_on_context(const ExecContext& ctx, const char* name, std::initializer_list<Arg> tensors) {
  for (const Arg& a : tensors) {
    RLCPP_CHECK(a.t->defined(), name << ": " << a.name << " is an undefined tensor");
    RLCPP_CHECK(a.t->device() == ctx.device(), name << ": " << a.name << " is on " << device_name(a.t->device())
                                                    << " but the op runs on " << ctx.name());
  }
}

// The context's backend, which must run `op` in `dtype`.
const Backend& backend_running(const ExecContext& ctx, const char* name, Op op, DType dtype) {
  const Backend& backend = backend_of(ctx);
  RLCPP_CHECK(backend.supports(op, dtype), "op " << name << ": " << precision_name(dtype) << " not supported on the "
                                                 << backend.name << " backend (" << ctx.name() << ")");
  return backend;
}

KernelContext kernel_context(const ExecContext& ctx) {
  return KernelContext{ctx.stream(), ctx.blas_handle(), ctx.device_index()};
}

// The dispatch point. Checks that every tensor is defined and sits on the context's device, the float ones F32 and
// the index ones I32, and that the context's backend runs `op` in `dtype` (ops.h: the dtype an op is asked in).
Dispatch dispatch(const ExecContext& ctx, const char* name, Op op, DType dtype, std::initializer_list<Arg> floats,
                  std::initializer_list<Arg> indices = {}) {
  const Device device = ctx.device();
  expect_on_context(ctx, name, floats);
  expect_on_context(ctx, name, indices);
  for (const Arg& a : floats)
    RLCPP_CHECK(a.t->dtype() == DType::kF32,
                "op " << name << ": dtype " << dtype_name(a.t->dtype()) << " not supported on " << device_name(device)
                      << " (" << a.name << ")");
  for (const Arg& a : indices)
    RLCPP_CHECK(a.t->dtype() == DType::kI32,
                name << ": " << a.name << " must be I32, got " << dtype_name(a.t->dtype()));
  return {backend_running(ctx, name, op, dtype), kernel_context(ctx)};
}

const float* f32(const Tensor& t) { return t.data<float>(); }
float* f32(Tensor& t) { return t.data<float>(); }
const int32_t* i32(const Tensor& t) { return t.data<int32_t>(); }

// cu_seqlens: every value where the backend reads host memory, its shape on a device (not read back).
void check_cu_seqlens(const Dispatch& d, const char* op, const Tensor& cu_seqlens, int64_t n) {
  if (d.host()) return expect_cu_seqlens(op, cu_seqlens, n);
  RLCPP_CHECK(cu_seqlens.dim() == 1 && cu_seqlens.numel() >= 2,
              op << ": cu_seqlens has shape " << shape_str(cu_seqlens.shape()) << ", expected (B+1) with B >= 1");
}

// A packing's checks: w F32, or BF16 where the backend reads host memory (a weight held in bf16: a frozen LoRA
// base, packed on the host).
Dispatch dispatch_packing(const ExecContext& ctx, const char* op, Op kind, DType format, const Tensor& w) {
  expect_on_context(ctx, op, {{"w", &w}});
  const Dispatch d = dispatch(ctx, op, kind, format, {});
  RLCPP_CHECK(w.dtype() == DType::kF32 || (w.dtype() == DType::kBF16 && d.host()),
              op << ": w of dtype " << dtype_name(w.dtype()) << " is not packed on " << ctx.name()
                 << " (F32; BF16 on the host)");
  return d;
}

void check_round(const char* op, DType round) {
  RLCPP_CHECK(is_float_storage(round),
              op << ": cannot round to " << dtype_name(round) << " (F32, BF16 or F16)");
}

}  // namespace

void matmul(const ExecContext& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
            float alpha, float beta, DType math) {
  const char* op = "matmul";
  const Dispatch d = dispatch(ctx, op, Op::kMatmul, math, {{"a", &a}, {"b", &b}, {"c", &c}});
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
  d.backend.matmul(d.k, f32(a), trans_a, f32(b), trans_b, f32(c), m, n, k, alpha, beta, math);
}

namespace {

// Sizes packed.panels (and scales) for `n` outputs of `k` inputs in `format`, reusing the buffers when they fit,
// and records the shape.
void shape_packed(const ExecContext& ctx, PackedWeight& packed, int64_t n, int64_t k, DType format) {
  const int64_t num_panels = (n + cpu::kPackedPanel - 1) / cpu::kPackedPanel;
  const Shape shape{num_panels, cpu::panel_depth(format, k), cpu::kPackedPanel};
  if (!packed.panels.defined() || packed.panels.shape() != shape || packed.panels.dtype() != format ||
      packed.panels.device() != ctx.device())
    packed.panels = ctx.empty(shape, format);
  if (is_quantized(format)) {
    if (!packed.scales.defined() || packed.scales.numel() != num_panels * cpu::kPackedPanel ||
        packed.scales.device() != ctx.device())
      packed.scales = ctx.empty({num_panels * cpu::kPackedPanel});
  } else {
    packed.scales = Tensor();
  }
  packed.n = n;
  packed.k = k;
  packed.format = format;
}

const float* scales_of(const PackedWeight& w) { return w.scales.defined() ? w.scales.data<float>() : nullptr; }

}  // namespace

void pack_weight(const ExecContext& ctx, const Tensor& w, PackedWeight& packed, DType format) {
  const char* op = "pack_weight";
  const Dispatch d = dispatch_packing(ctx, op, Op::kPackWeight, format, w);
  expect_rank(op, {"w", &w}, 2, "(N,K)");
  shape_packed(ctx, packed, w.size(0), w.size(1), format);
  d.backend.pack_weight(d.k, w.raw(), w.dtype(), packed.panels.raw(),
                        packed.scales.defined() ? packed.scales.data<float>() : nullptr, w.size(0), w.size(1),
                        packed.panels.size(1), format);
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
  // Computed on the host (the reference of what a packed weight holds), then placed on ctx's device.
  Tensor w = Tensor::empty({packed.n, packed.k});
  cpu::unpack_weight(packed.panels.raw(), scales_of(packed), f32(w), packed.n, packed.k, packed.format);
  return ctx.device() == Device::kCPU ? w : ctx.copy_of(w);
}

void pack_weight_transposed(const ExecContext& ctx, const Tensor& w, PackedWeight& packed, DType format) {
  const char* op = "pack_weight_transposed";
  const Dispatch d = dispatch_packing(ctx, op, Op::kPackWeightTransposed, format, w);
  expect_rank(op, {"w", &w}, 2, "(N,K)");
  shape_packed(ctx, packed, w.size(1), w.size(0), format);
  d.backend.pack_weight_transposed(d.k, w.raw(), w.dtype(), packed.panels.raw(), w.size(0), w.size(1), format);
}

namespace {

// The checks of matmul_packed and matmul_packed_residual (residual null for the former).
Dispatch check_packed_product(const ExecContext& ctx, const char* op, const Tensor& x, const PackedWeight& w,
                              const Tensor& y, DType round, const Tensor* residual) {
  RLCPP_CHECK(w.panels.defined() && w.panels.device() == ctx.device() && w.panels.dtype() == w.format,
              op << ": the packed weight is empty, not on " << ctx.name() << ", or not in its format "
                 << precision_name(w.format));
  const Tensor& r = residual ? *residual : y;  // y stands in so the checks below stay uniform
  const Dispatch d = dispatch(ctx, op, Op::kMatmulPacked, w.format, {{"x", &x}, {"y", &y}, {"residual", &r}});
  RLCPP_CHECK(!w.scales.defined() || w.scales.device() == ctx.device(),
              op << ": the packed weight's scales are not on " << ctx.name());
  RLCPP_CHECK(!is_quantized(w.format) || w.scales.numel() == w.panels.size(0) * cpu::kPackedPanel,
              op << ": the " << precision_name(w.format) << " packed weight has no channel scales");
  check_round(op, round);
  RLCPP_CHECK(!is_quantized(round), op << ": cannot round outputs to " << dtype_name(round));
  expect_rank(op, {"x", &x}, 2, "(M,K)");
  expect_shape(op, {"w.panels", &w.panels},
               {(w.n + cpu::kPackedPanel - 1) / cpu::kPackedPanel, cpu::panel_depth(w.format, w.k), cpu::kPackedPanel});
  RLCPP_CHECK(x.size(1) == w.k, op << ": x " << shape_str(x.shape()) << " has K = " << x.size(1)
                                   << " but the packed weight is (" << w.n << "," << w.k << ")");
  expect_shape(op, {"y", &y}, {x.size(0), w.n});
  return d;
}

}  // namespace

void matmul_packed(const ExecContext& ctx, const Tensor& x, const PackedWeight& w, Tensor& y, bool accumulate,
                   DType round) {
  const Dispatch d = check_packed_product(ctx, "matmul_packed", x, w, y, round, nullptr);
  d.backend.matmul_packed(d.k, f32(x), w.panels.raw(), scales_of(w), w.format, f32(y), x.size(0), w.n, w.k,
                          w.panels.size(1), accumulate ? f32(y) : nullptr, round);
}

void matmul_packed_residual(const ExecContext& ctx, const Tensor& x, const PackedWeight& w, const Tensor& residual,
                            Tensor& y, DType round) {
  const char* op = "matmul_packed_residual";
  const Dispatch d = check_packed_product(ctx, op, x, w, y, round, &residual);
  expect_shape(op, {"residual", &residual}, y.shape());
  d.backend.matmul_packed(d.k, f32(x), w.panels.raw(), scales_of(w), w.format, f32(y), x.size(0), w.n, w.k,
                          w.panels.size(1), f32(residual), round);
}

void round_to(const ExecContext& ctx, Tensor& x, DType dtype) {
  const char* op = "round_to";
  if (dtype == DType::kF32 || dtype == DType::kTF32) return;  // fp32 values stay as they are
  check_round(op, dtype);
  const Dispatch d = dispatch(ctx, op, Op::kRoundTo, dtype, {{"x", &x}});
  d.backend.round_to(d.k, f32(x), x.numel(), dtype);
}

void convert(const ExecContext& ctx, const Tensor& src, Tensor& dst) {
  const char* op = "convert";
  expect_on_context(ctx, op, {{"src", &src}, {"dst", &dst}});
  for (const Arg& a : {Arg{"src", &src}, Arg{"dst", &dst}}) {
    const DType d = a.t->dtype();
    RLCPP_CHECK(is_float_storage(d),
                op << ": " << a.name << " is " << dtype_name(d) << ", expected F32, BF16 or F16");
  }
  RLCPP_CHECK(src.shape() == dst.shape(), op << ": src " << shape_str(src.shape()) << " and dst "
                                             << shape_str(dst.shape()) << " differ in shape");
  const Backend& backend = backend_running(ctx, op, Op::kConvert, src.dtype());
  backend_running(ctx, op, Op::kConvert, dst.dtype());
  backend.convert(kernel_context(ctx), src.raw(), src.dtype(), dst.raw(), dst.dtype(), src.numel());
}

Tensor stored_as(const ExecContext& ctx, const Tensor& x, DType dtype) {
  RLCPP_CHECK(x.dtype() == DType::kF32, "stored_as: x must be F32, got " << dtype_name(x.dtype()));
  RLCPP_CHECK(is_float_storage(dtype), "stored_as: cannot store as " << dtype_name(dtype) << " (F32, BF16 or F16)");
  Tensor out = ctx.empty(x.shape(), dtype);
  convert(ctx, x, out);
  return out;
}

void linear_weight_grad(const ExecContext& ctx, const Tensor& dy, const Tensor& x, Tensor& dw, DType math) {
  const char* op = "linear_weight_grad";
  const Dispatch d = dispatch(ctx, op, Op::kLinearWeightGrad, math, {{"dy", &dy}, {"x", &x}, {"dw", &dw}});
  expect_rank(op, {"dy", &dy}, 2, "(M,N)");
  expect_rank(op, {"x", &x}, 2, "(M,K)");
  RLCPP_CHECK(dy.size(0) == x.size(0), op << ": dy " << shape_str(dy.shape()) << " and x " << shape_str(x.shape())
                                          << " have different row counts");
  expect_shape(op, {"dw", &dw}, {dy.size(1), x.size(1)});
  d.backend.linear_weight_grad(d.k, f32(dy), f32(x), f32(dw), dy.size(0), dy.size(1), x.size(1), math);
}

void add_bias(const ExecContext& ctx, Tensor& y, const Tensor& bias) {
  const char* op = "add_bias";
  const Dispatch d = dispatch(ctx, op, Op::kAddBias, DType::kF32, {{"y", &y}, {"bias", &bias}});
  expect_rank(op, {"y", &y}, 2, "(M,N)");
  expect_shape(op, {"bias", &bias}, {y.size(1)});
  d.backend.add_bias(d.k, f32(y), f32(bias), y.size(0), y.size(1));
}

void bias_backward(const ExecContext& ctx, const Tensor& dy, Tensor& dbias) {
  const char* op = "bias_backward";
  const Dispatch d = dispatch(ctx, op, Op::kBiasBackward, DType::kF32, {{"dy", &dy}, {"dbias", &dbias}});
  expect_rank(op, {"dy", &dy}, 2, "(M,N)");
  expect_shape(op, {"dbias", &dbias}, {dy.size(1)});
  d.backend.bias_backward(d.k, f32(dy), f32(dbias), dy.size(0), dy.size(1));
}

void add_inplace(const ExecContext& ctx, Tensor& x, const Tensor& y) {
  const char* op = "add_inplace";
  const Dispatch d = dispatch(ctx, op, Op::kAddInplace, DType::kF32, {{"x", &x}, {"y", &y}});
  expect_shape(op, {"y", &y}, x.shape());
  d.backend.add_inplace(d.k, f32(x), f32(y), x.numel());
}

void scale_inplace(const ExecContext& ctx, Tensor& x, float s) {
  const Dispatch d = dispatch(ctx, "scale_inplace", Op::kScaleInplace, DType::kF32, {{"x", &x}});
  d.backend.scale_inplace(d.k, f32(x), s, x.numel());
}

void embedding_forward(const ExecContext& ctx, const Tensor& table, const Tensor& ids, Tensor& out) {
  const char* op = "embedding_forward";
  expect_on_context(ctx, op, {{"table", &table}});
  RLCPP_CHECK(is_float_storage(table.dtype()),
              op << ": table dtype " << dtype_name(table.dtype()) << " not supported (F32, BF16 or F16)");
  const Dispatch d = dispatch(ctx, op, Op::kEmbeddingForward, table.dtype(), {{"out", &out}}, {{"ids", &ids}});
  expect_rank(op, {"table", &table}, 2, "(V,C)");
  expect_rank(op, {"ids", &ids}, 1, "(N)");
  expect_shape(op, {"out", &out}, {ids.size(0), table.size(1)});
  if (d.host()) expect_indices_in(op, {"ids", &ids}, 0, table.size(0));
  d.backend.embedding_forward(d.k, table.raw(), table.dtype(), i32(ids), f32(out), ids.size(0), table.size(0),
                              table.size(1));
}

void embedding_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const char* op = "embedding_backward";
  const Dispatch d =
      dispatch(ctx, op, Op::kEmbeddingBackward, DType::kF32, {{"dout", &dout}, {"dtable", &dtable}}, {{"ids", &ids}});
  expect_rank(op, {"dtable", &dtable}, 2, "(V,C)");
  expect_rank(op, {"ids", &ids}, 1, "(N)");
  expect_shape(op, {"dout", &dout}, {ids.size(0), dtable.size(1)});
  if (d.host()) expect_indices_in(op, {"ids", &ids}, 0, dtable.size(0));
  d.backend.embedding_backward(d.k, f32(dout), i32(ids), f32(dtable), ids.size(0), dtable.size(0), dtable.size(1));
}

void rmsnorm_forward(const ExecContext& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                     Tensor& rstd, DType round) {
  const char* op = "rmsnorm_forward";
  const Dispatch d = dispatch(ctx, op, Op::kRmsnormForward, DType::kF32,
                              {{"x", &x}, {"weight", &weight}, {"out", &out}, {"rstd", &rstd}});
  expect_rank(op, {"x", &x}, 2, "(N,C)");
  expect_shape(op, {"weight", &weight}, {x.size(1)});
  expect_shape(op, {"out", &out}, x.shape());
  expect_shape(op, {"rstd", &rstd}, {x.size(0)});
  RLCPP_CHECK(eps >= 0.0f, op << ": eps = " << eps << ", expected >= 0");
  round = storage_dtype(round);  // a tf32 model's activations are fp32 values: not rounded
  check_round(op, round);
  d.backend.rmsnorm_forward(d.k, f32(x), f32(weight), eps, f32(out), f32(rstd), x.size(0), x.size(1), round);
}

void rmsnorm_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& x, const Tensor& weight,
                      const Tensor& rstd, Tensor& dx, Tensor& dweight) {
  const char* op = "rmsnorm_backward";
  const Dispatch d =
      dispatch(ctx, op, Op::kRmsnormBackward, DType::kF32,
               {{"dout", &dout}, {"x", &x}, {"weight", &weight}, {"rstd", &rstd}, {"dx", &dx}, {"dweight", &dweight}});
  expect_rank(op, {"x", &x}, 2, "(N,C)");
  expect_shape(op, {"dout", &dout}, x.shape());
  expect_shape(op, {"weight", &weight}, {x.size(1)});
  expect_shape(op, {"rstd", &rstd}, {x.size(0)});
  expect_shape(op, {"dx", &dx}, x.shape());
  expect_shape(op, {"dweight", &dweight}, {x.size(1)});
  d.backend.rmsnorm_backward(d.k, f32(dout), f32(x), f32(weight), f32(rstd), f32(dx), f32(dweight), x.size(0),
                             x.size(1));
}

Tensor rope_table(const ExecContext& ctx, int64_t max_positions, int64_t head_dim, float theta) {
  RLCPP_CHECK(max_positions > 0, "rope_table: max_positions = " << max_positions << ", expected > 0");
  RLCPP_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope_table: head_dim = " << head_dim << ", expected even and > 0");
  RLCPP_CHECK(theta > 0.0f, "rope_table: theta = " << theta << ", expected > 0");
  // Hugging Face's float arithmetic, on the host whatever the device (a table is made once per model).
  Tensor table = ctx.device() == Device::kCPU ? ctx.empty({max_positions, head_dim})
                                              : Tensor::empty({max_positions, head_dim});
  cpu::rope_table(f32(table), max_positions, head_dim, theta);
  return table.device() == ctx.device() ? table : ctx.copy_of(table);
}

namespace {

// The checks of rope_forward and rope_backward: x (N,H,D), positions (N) inside the table (max_positions, D).
Dispatch check_rope(const ExecContext& ctx, const char* op, Op which, const Tensor& x, const Tensor& positions,
                    const Tensor& table) {
  const Dispatch d =
      dispatch(ctx, op, which, DType::kF32, {{"x", &x}, {"table", &table}}, {{"positions", &positions}});
  expect_rank(op, {"x", &x}, 3, "(N,H,D)");
  expect_shape(op, {"positions", &positions}, {x.size(0)});
  expect_rank(op, {"table", &table}, 2, "(max_positions,D)");
  RLCPP_CHECK(table.size(1) == x.size(2), op << ": table " << shape_str(table.shape()) << " is for head_dim "
                                             << table.size(1) << " but x " << shape_str(x.shape()) << " has "
                                             << x.size(2));
  RLCPP_CHECK(x.size(2) % 2 == 0, op << ": head_dim " << x.size(2) << " is odd");
  if (d.host()) expect_indices_in(op, {"positions", &positions}, 0, table.size(0));
  return d;
}

}  // namespace

void rope_forward(const ExecContext& ctx, Tensor& x, const Tensor& positions, const Tensor& table) {
  const Dispatch d = check_rope(ctx, "rope_forward", Op::kRopeForward, x, positions, table);
  d.backend.rope_forward(d.k, f32(x), i32(positions), f32(table), x.size(0), x.size(1), x.size(2));
}

void rope_backward(const ExecContext& ctx, Tensor& dx, const Tensor& positions, const Tensor& table) {
  const Dispatch d = check_rope(ctx, "rope_backward", Op::kRopeBackward, dx, positions, table);
  d.backend.rope_backward(d.k, f32(dx), i32(positions), f32(table), dx.size(0), dx.size(1), dx.size(2));
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
// table (where the backend reads host memory), table (max_positions, D), D even.
Dispatch check_rope_qkv(const ExecContext& ctx, const char* op, Op which, const Tensor& qkv, const char* qkv_name,
                        const Tensor& q, const char* q_name, const Tensor& k, const char* k_name, const Tensor& v,
                        const char* v_name, const Tensor& positions, const Tensor& table) {
  const Dispatch d =
      dispatch(ctx, op, which, DType::kF32,
               {{qkv_name, &qkv}, {q_name, &q}, {k_name, &k}, {v_name, &v}, {"table", &table}},
               {{"positions", &positions}});
  check_qkv_shapes(op, qkv, qkv_name, q, q_name, k, k_name, v, v_name);
  const int64_t n = q.size(0), dim = q.size(2);
  expect_shape(op, {"positions", &positions}, {n});
  expect_rank(op, {"table", &table}, 2, "(max_positions,D)");
  RLCPP_CHECK(table.size(1) == dim, op << ": table " << shape_str(table.shape()) << " is for head_dim "
                                       << table.size(1) << " but " << q_name << " " << shape_str(q.shape()) << " has "
                                       << dim);
  RLCPP_CHECK(dim % 2 == 0, op << ": head_dim " << dim << " is odd");
  if (d.host()) expect_indices_in(op, {"positions", &positions}, 0, table.size(0));
  return d;
}

}  // namespace

void rope_split_qkv(const ExecContext& ctx, const Tensor& qkv, const Tensor& positions, const Tensor& table, Tensor& q,
                    Tensor& k, Tensor& v) {
  const Dispatch d = check_rope_qkv(ctx, "rope_split_qkv", Op::kRopeSplitQkv, qkv, "qkv", q, "q", k, "k", v, "v",
                                    positions, table);
  d.backend.rope_split_qkv(d.k, f32(qkv), i32(positions), f32(table), f32(q), f32(k), f32(v), q.size(0), q.size(1),
                           k.size(1), q.size(2));
}

void rope_backward_merge_qkv(const ExecContext& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& positions, const Tensor& table, Tensor& dqkv) {
  const Dispatch d = check_rope_qkv(ctx, "rope_backward_merge_qkv", Op::kRopeBackwardMergeQkv, dqkv, "dqkv", dq,
                                    "dq", dk, "dk", dv, "dv", positions, table);
  d.backend.rope_backward_merge_qkv(d.k, f32(dq), f32(dk), f32(dv), i32(positions), f32(table), f32(dqkv),
                                    dq.size(0), dq.size(1), dk.size(1), dq.size(2));
}

void split_qkv(const ExecContext& ctx, const Tensor& qkv, Tensor& q, Tensor& k, Tensor& v) {
  const char* op = "split_qkv";
  const Dispatch d = dispatch(ctx, op, Op::kSplitQkv, DType::kF32, {{"qkv", &qkv}, {"q", &q}, {"k", &k}, {"v", &v}});
  check_qkv_shapes(op, qkv, "qkv", q, "q", k, "k", v, "v");
  d.backend.split_qkv(d.k, f32(qkv), f32(q), f32(k), f32(v), q.size(0), q.size(1), k.size(1), q.size(2));
}

void merge_qkv(const ExecContext& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, Tensor& dqkv) {
  const char* op = "merge_qkv";
  const Dispatch d =
      dispatch(ctx, op, Op::kMergeQkv, DType::kF32, {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}, {"dqkv", &dqkv}});
  check_qkv_shapes(op, dqkv, "dqkv", dq, "dq", dk, "dk", dv, "dv");
  d.backend.merge_qkv(d.k, f32(dq), f32(dk), f32(dv), f32(dqkv), dq.size(0), dq.size(1), dk.size(1), dq.size(2));
}

void attention_forward(const ExecContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, float scale, Tensor& out, Tensor& lse) {
  const char* op = "attention_forward";
  const Dispatch d = dispatch(ctx, op, Op::kAttentionForward, DType::kF32,
                              {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"lse", &lse}},
                              {{"cu_seqlens", &cu_seqlens}});
  const AttentionDims dims = attention_dims(op, q, k, v);
  expect_shape(op, {"out", &out}, q.shape());
  expect_shape(op, {"lse", &lse}, {dims.n, dims.hq});
  check_cu_seqlens(d, op, cu_seqlens, dims.n);
  d.backend.attention_forward(d.k, f32(q), f32(k), f32(v), i32(cu_seqlens), cu_seqlens.numel() - 1, dims.n, dims.hq,
                              dims.hkv, dims.d, scale, f32(out), f32(lse));
}

void attention_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  const char* op = "attention_backward";
  const Dispatch d = dispatch(ctx, op, Op::kAttentionBackward, DType::kF32,
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
  check_cu_seqlens(d, op, cu_seqlens, dims.n);
  d.backend.attention_backward(d.k, f32(dout), f32(q), f32(k), f32(v), f32(out), f32(lse), i32(cu_seqlens),
                               cu_seqlens.numel() - 1, dims.n, dims.hq, dims.hkv, dims.d, scale, f32(dq), f32(dk),
                               f32(dv));
}

namespace {

// The KV cache's storage dtype (F32, BF16, F16), checked; both caches the same and on the op's device.
DType kv_cache_dtype(const ExecContext& ctx, const char* op, const Tensor& k_cache, const Tensor& v_cache) {
  RLCPP_CHECK(k_cache.defined() && v_cache.defined(), op << ": a KV cache tensor is undefined");
  RLCPP_CHECK(k_cache.device() == ctx.device() && v_cache.device() == ctx.device(),
              op << ": the KV cache is on " << device_name(k_cache.device()) << " / " << device_name(v_cache.device())
                 << " but the op's tensors on " << device_name(ctx.device()));
  const DType dtype = k_cache.dtype();
  RLCPP_CHECK(is_float_storage(dtype),
              op << ": KV cache dtype " << dtype_name(dtype) << " not supported (F32, BF16 or F16)");
  RLCPP_CHECK(v_cache.dtype() == dtype, op << ": k_cache is " << dtype_name(dtype) << " but v_cache is "
                                           << dtype_name(v_cache.dtype()));
  return dtype;
}

}  // namespace

void paged_kv_write(const ExecContext& ctx, const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                    Tensor& k_cache, Tensor& v_cache) {
  const char* op = "paged_kv_write";
  const DType dtype = kv_cache_dtype(ctx, op, k_cache, v_cache);
  const Dispatch d = dispatch(ctx, op, Op::kPagedKvWrite, dtype, {{"k", &k}, {"v", &v}},
                              {{"slot_mapping", &slot_mapping}});
  expect_rank(op, {"k", &k}, 3, "(N,Hkv,D)");
  expect_shape(op, {"v", &v}, k.shape());
  expect_shape(op, {"slot_mapping", &slot_mapping}, {k.size(0)});
  expect_rank(op, {"k_cache", &k_cache}, 3, "(num_slots,Hkv,D)");
  expect_shape(op, {"k_cache", &k_cache}, {k_cache.size(0), k.size(1), k.size(2)});
  expect_shape(op, {"v_cache", &v_cache}, k_cache.shape());
  if (d.host()) expect_indices_in(op, {"slot_mapping", &slot_mapping}, -1, k_cache.size(0));
  d.backend.paged_kv_write(d.k, f32(k), f32(v), i32(slot_mapping), k.size(0), k.size(1) * k.size(2), k_cache.raw(),
                           v_cache.raw(), dtype);
}

void paged_attention(const ExecContext& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& query_seq, const Tensor& query_pos, const Tensor& block_indptr,
                     const Tensor& block_indices, int64_t block_size, float scale, Tensor& out) {
  const char* op = "paged_attention";
  const DType dtype = kv_cache_dtype(ctx, op, k_cache, v_cache);
  const Dispatch d = dispatch(ctx, op, Op::kPagedAttention, dtype, {{"q", &q}, {"out", &out}},
                              {{"query_seq", &query_seq},
                               {"query_pos", &query_pos},
                               {"block_indptr", &block_indptr},
                               {"block_indices", &block_indices}});
  expect_rank(op, {"q", &q}, 3, "(N,Hq,D)");
  expect_rank(op, {"k_cache", &k_cache}, 3, "(num_slots,Hkv,D)");
  const int64_t n = q.size(0), hq = q.size(1), dim = q.size(2), hkv = k_cache.size(1);
  expect_shape(op, {"k_cache", &k_cache}, {k_cache.size(0), hkv, dim});
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
  if (d.host())
    expect_paged_rows(op, query_seq, query_pos, block_indptr, block_indices, block_size, k_cache.size(0) / block_size);
  d.backend.paged_attention(d.k, f32(q), k_cache.raw(), v_cache.raw(), dtype, i32(query_seq), i32(query_pos),
                            i32(block_indptr), i32(block_indices), block_size, n, hq, hkv, dim, scale, f32(out));
}

void swiglu_forward(const ExecContext& ctx, const Tensor& gate_up, Tensor& out) {
  const char* op = "swiglu_forward";
  const Dispatch d = dispatch(ctx, op, Op::kSwigluForward, DType::kF32, {{"gate_up", &gate_up}, {"out", &out}});
  expect_rank(op, {"gate_up", &gate_up}, 2, "(N,2F)");
  RLCPP_CHECK(gate_up.size(1) % 2 == 0, op << ": gate_up " << shape_str(gate_up.shape()) << " has an odd width");
  const int64_t n = gate_up.size(0), f = gate_up.size(1) / 2;
  expect_shape(op, {"out", &out}, {n, f});
  d.backend.swiglu_forward(d.k, f32(gate_up), f32(out), n, f);
}

namespace {

// swiglu_backward with or without act (its forward's output recomputed in the same pass).
void swiglu_backward_into(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up,
                          Tensor* act) {
  const char* op = "swiglu_backward";
  const Tensor& a = act ? *act : dout;  // dout stands in so the checks below stay uniform
  const Dispatch d = dispatch(ctx, op, Op::kSwigluBackward, DType::kF32,
                              {{"dout", &dout}, {"gate_up", &gate_up}, {"dgate_up", &dgate_up}, {"act", &a}});
  expect_rank(op, {"gate_up", &gate_up}, 2, "(N,2F)");
  RLCPP_CHECK(gate_up.size(1) % 2 == 0, op << ": gate_up " << shape_str(gate_up.shape()) << " has an odd width");
  const int64_t n = gate_up.size(0), f = gate_up.size(1) / 2;
  expect_shape(op, {"dout", &dout}, {n, f});
  expect_shape(op, {"dgate_up", &dgate_up}, gate_up.shape());
  expect_shape(op, {"act", &a}, {n, f});
  d.backend.swiglu_backward(d.k, f32(dout), f32(gate_up), f32(dgate_up), act ? f32(*act) : nullptr, n, f);
}

}  // namespace

void swiglu_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up) {
  swiglu_backward_into(ctx, dout, gate_up, dgate_up, nullptr);
}

void swiglu_backward(const ExecContext& ctx, const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up, Tensor& act) {
  swiglu_backward_into(ctx, dout, gate_up, dgate_up, &act);
}

void logprob_forward(const ExecContext& ctx, const Tensor& logits, const Tensor& targets, float temperature,
                     Tensor& logp, Tensor& lse, Tensor* entropy) {
  const char* op = "logprob_forward";
  const Tensor& ent = entropy ? *entropy : logp;  // logp stands in so the checks below stay uniform
  const Dispatch d = dispatch(ctx, op, Op::kLogprobForward, DType::kF32,
                              {{"logits", &logits}, {"logp", &logp}, {"lse", &lse}, {"entropy", &ent}},
                              {{"targets", &targets}});
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"logp", &logp}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  expect_shape(op, {"entropy", &ent}, {n});
  check_temperature(temperature, op, /*zero_is_greedy=*/false);
  // A device's targets are not read back: a bad one gives NaN there (kernels/cuda/logprob_cuda.cu).
  if (d.host()) expect_targets(op, targets, vocab);
  d.backend.logprob_forward(d.k, f32(logits), i32(targets), temperature, f32(logp), f32(lse),
                            entropy ? f32(*entropy) : nullptr, n, vocab);
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
  const Dispatch d =
      dispatch(ctx, op, Op::kLogprobBackward, DType::kF32,
               {{"dlogp", &dlogp}, {"dentropy", &dent}, {"logits", &logits}, {"lse", &lse}, {"dlogits", &dlogits}},
               {{"targets", &targets}});
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"dlogp", &dlogp}, {n});
  expect_shape(op, {"dentropy", &dent}, {n});
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  expect_shape(op, {"dlogits", &dlogits}, logits.shape());
  check_temperature(temperature, op, /*zero_is_greedy=*/false);
  if (d.host()) expect_targets(op, targets, vocab);
  d.backend.logprob_backward(d.k, f32(dlogp), dentropy ? f32(*dentropy) : nullptr, f32(logits), i32(targets),
                             temperature, f32(lse), f32(dlogits), n, vocab);
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
  const Dispatch d = dispatch(ctx, op, Op::kLogprobTruncatedForward, DType::kF32,
                              {{"logits", &logits}, {"logp", &logp}, {"lse", &lse}}, {{"targets", &targets}});
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"logp", &logp}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  check_truncation(op, t, temperature);
  if (d.host()) expect_targets(op, targets, vocab);
  d.backend.logprob_truncated_forward(d.k, f32(logits), i32(targets), temperature, t, f32(logp), f32(lse), n, vocab);
}

void logprob_truncated_backward(const ExecContext& ctx, const Tensor& dlogp, const Tensor& logits,
                                const Tensor& targets, float temperature, const Truncation& t, const Tensor& lse,
                                Tensor& dlogits) {
  const char* op = "logprob_truncated_backward";
  const Dispatch d =
      dispatch(ctx, op, Op::kLogprobTruncatedBackward, DType::kF32,
               {{"dlogp", &dlogp}, {"logits", &logits}, {"lse", &lse}, {"dlogits", &dlogits}}, {{"targets", &targets}});
  expect_rank(op, {"logits", &logits}, 2, "(N,V)");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  expect_shape(op, {"dlogp", &dlogp}, {n});
  expect_shape(op, {"targets", &targets}, {n});
  expect_shape(op, {"lse", &lse}, {n});
  expect_shape(op, {"dlogits", &dlogits}, logits.shape());
  check_truncation(op, t, temperature);
  if (d.host()) expect_targets(op, targets, vocab);
  d.backend.logprob_truncated_backward(d.k, f32(dlogp), f32(logits), i32(targets), temperature, t, f32(lse),
                                       f32(dlogits), n, vocab);
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
  const Dispatch d =
      dispatch(ctx, op, Op::kAdamwStep, DType::kF32, {{"param", &param}, {"grad", &grad}, {"m", &m}, {"v", &v}});
  expect_shape(op, {"grad", &grad}, param.shape());
  expect_shape(op, {"m", &m}, param.shape());
  expect_shape(op, {"v", &v}, param.shape());
  RLCPP_CHECK(step >= 1, op << ": step = " << step << ", expected >= 1 (steps count from 1)");
  RLCPP_CHECK(p.beta1 >= 0.0f && p.beta1 < 1.0f && p.beta2 >= 0.0f && p.beta2 < 1.0f,
              op << ": betas (" << p.beta1 << ", " << p.beta2 << ") must be in [0, 1)");
  d.backend.adamw_step(d.k, f32(param), f32(grad), f32(m), f32(v), param.numel(), p.lr, p.beta1, p.beta2, p.eps,
                       p.weight_decay, step);
}

double l2_norm(const ExecContext& ctx, const Tensor& x) {
  const Dispatch d = dispatch(ctx, "l2_norm", Op::kL2Norm, DType::kF32, {{"x", &x}});
  return d.backend.l2_norm(d.k, f32(x), x.numel());
}

bool all_finite(const ExecContext& ctx, const Tensor& x) {
  const Dispatch d = dispatch(ctx, "all_finite", Op::kAllFinite, DType::kF32, {{"x", &x}});
  return d.backend.all_finite(d.k, f32(x), x.numel());
}

uint64_t keyed_checksum(const ExecContext& ctx, const Tensor& x) {
  const Dispatch d = dispatch(ctx, "keyed_checksum", Op::kKeyedChecksum, DType::kF32, {{"x", &x}});
  return d.backend.keyed_checksum(d.k, f32(x), x.numel());
}

}  // namespace rlcpp::ops
