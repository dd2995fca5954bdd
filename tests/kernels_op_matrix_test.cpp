// The op matrix (ggml's test-backend-ops): every op of kernels/backend.h x every backend this build has and this
// machine can run x every dtype the backend runs the op in, against the "reference" backend (kernels/reference/:
// the readable definitions) on the same fresh random inputs of odd sizes. Exact to the bit where the design
// promises bits (packing, the packed product's fma chains, roundings, copies and index ops, the keyed checksum; on
// the CPU also the weight gradient's chains); elsewhere within a tolerance of the dtype, relative to the output's
// largest magnitude. Outputs are poisoned with NaN first (an unwritten element fails). A backend's (op, dtype) that
// the reference does not run (CUDA's tensor-core math) is held to the reference's fp32 result within that math's
// rounding. On a machine without a GPU the cuda cases skip saying why; scripts/device_check.sh runs them on one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/exec_context.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "tests/kernels_test_support.h"

namespace rlcpp {
namespace {

using ops::Op;
using testing::Rng;

// One output of an op, copied back to the host.
struct Output {
  std::string name;
  Tensor value;
};
using Outputs = std::vector<Output>;

// The op's inputs are drawn from this seed on every backend, so each backend sees the same values.
constexpr uint32_t kSeed = 2026;

Tensor on(const ExecContext& ctx, const Tensor& host) { return ctx.copy_of(host); }
Tensor back(const ExecContext& ctx, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  ctx.copy(t, host);
  return host;
}
Tensor poisoned(const ExecContext& ctx, Shape shape) { return on(ctx, testing::filled(std::move(shape), NAN)); }
Tensor ints(const ExecContext& ctx, const std::vector<int32_t>& values) { return on(ctx, testing::int_tensor(values)); }
Tensor scalar(double v) {
  Tensor t = Tensor::empty({1});
  t.data<float>()[0] = static_cast<float>(v);
  return t;
}

// ---------------------------------------------------------------- the ops, each run on one context

Outputs run_matmul(const ExecContext& ctx, DType math) {
  Rng rng(kSeed);
  Outputs out;
  for (const bool trans_b : {false, true}) {
    const Tensor a = rng.normal({17, 97}), b = rng.normal(trans_b ? Shape{54, 97} : Shape{97, 54});
    Tensor c = on(ctx, rng.normal({17, 54}));
    ops::matmul(ctx, on(ctx, a), false, on(ctx, b), trans_b, c, 0.75f, 0.5f, math);
    out.push_back({trans_b ? "c (b transposed)" : "c", back(ctx, c)});
  }
  return out;
}

Outputs run_pack_weight(const ExecContext& ctx, DType format) {
  Rng rng(kSeed);
  ops::PackedWeight packed;
  ops::pack_weight(ctx, on(ctx, rng.normal({54, 97}, 0.3f)), packed, format);
  Outputs out{{"panels", back(ctx, packed.panels)}};
  if (packed.scales.defined()) out.push_back({"scales", back(ctx, packed.scales)});
  return out;
}

Outputs run_pack_weight_transposed(const ExecContext& ctx, DType format) {
  Rng rng(kSeed);
  ops::PackedWeight packed;
  ops::pack_weight_transposed(ctx, on(ctx, rng.normal({53, 97})), packed, format);  // bf16: an odd pair row
  return {{"panels", back(ctx, packed.panels)}};
}

Outputs run_matmul_packed(const ExecContext& ctx, DType format) {
  Rng rng(kSeed);
  ops::PackedWeight packed;
  ops::pack_weight(ctx, on(ctx, rng.normal({54, 97}, 0.3f)), packed, format);
  const Tensor x = on(ctx, rng.normal({17, 97})), residual = on(ctx, rng.normal({17, 54}));
  Outputs out;
  for (const DType round : {DType::kF32, DType::kBF16, DType::kF16}) {
    Tensor y = poisoned(ctx, {17, 54}), y_res = poisoned(ctx, {17, 54});
    ops::matmul_packed(ctx, x, packed, y, false, round);
    ops::matmul_packed_residual(ctx, x, packed, residual, y_res, round);
    out.push_back({std::string("y rounded to ") + dtype_name(round), back(ctx, y)});
    out.push_back({std::string("residual + y rounded to ") + dtype_name(round), back(ctx, y_res)});
  }
  return out;
}

Outputs run_round_to(const ExecContext& ctx, DType dtype) {
  Rng rng(kSeed);
  Tensor x = on(ctx, rng.normal({1001}, 100.0f));
  ops::round_to(ctx, x, dtype);
  return {{"x", back(ctx, x)}};
}

// n elements of `dtype` with random bit patterns, NaN excepted (a NaN's payload is the one thing the fast and the
// reference conversions may keep differently): every binade, subnormals, zeros and infinities of the dtype.
Tensor random_bits(Rng& rng, int64_t n, DType dtype) {
  // The magnitude's bits of an infinity: above them, a NaN.
  const uint32_t inf = dtype == DType::kF32 ? 0x7F800000u : dtype == DType::kBF16 ? 0x7F80u : 0x7C00u;
  const uint32_t sign = dtype == DType::kF32 ? 0x80000000u : 0x8000u;
  Tensor t = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = static_cast<uint32_t>(rng.gen()()) & (sign | (sign - 1));
    while ((u & (sign - 1)) > inf) u = static_cast<uint32_t>(rng.gen()()) & (sign | (sign - 1));
    if (dtype == DType::kF32)
      std::memcpy(t.data<float>() + i, &u, sizeof u);
    else
      t.data<uint16_t>()[i] = static_cast<uint16_t>(u);
  }
  return t;
}

// Every pair (from, dtype): to 16 bits rounded, from 16 bits widened, the same dtype copied.
Outputs run_convert(const ExecContext& ctx, DType dtype) {
  Rng rng(kSeed);
  Outputs out;
  for (const DType from : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Tensor src = on(ctx, random_bits(rng, 1001, from));
    Tensor dst = on(ctx, Tensor::empty({1001}, dtype));
    ops::convert(ctx, src, dst);
    out.push_back({std::string("from ") + dtype_name(from), back(ctx, dst)});
  }
  return out;
}

Outputs run_linear_weight_grad(const ExecContext& ctx, DType math) {
  Rng rng(kSeed);
  const Tensor dy = rng.normal({17, 54}), x = rng.normal({17, 97});
  Tensor dw = on(ctx, rng.normal({54, 97}));
  ops::linear_weight_grad(ctx, on(ctx, dy), on(ctx, x), dw, math);
  return {{"dw", back(ctx, dw)}};
}

Outputs run_add_bias(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  Tensor y = on(ctx, rng.normal({17, 54}));
  ops::add_bias(ctx, y, on(ctx, rng.normal({54})));
  return {{"y", back(ctx, y)}};
}

Outputs run_bias_backward(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const Tensor dy = rng.normal({97, 54});
  Tensor dbias = on(ctx, rng.normal({54}));
  ops::bias_backward(ctx, on(ctx, dy), dbias);
  return {{"dbias", back(ctx, dbias)}};
}

Outputs run_elementwise(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  Tensor x = on(ctx, rng.normal({1001}));
  ops::add_inplace(ctx, x, on(ctx, rng.normal({1001})));
  Outputs out{{"x + y", back(ctx, x)}};
  ops::scale_inplace(ctx, x, -0.37f);
  out.push_back({"(x + y) * s", back(ctx, x)});
  return out;
}

Outputs run_reductions(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  Tensor x = on(ctx, rng.normal({100003}));
  Tensor checksum = Tensor::empty({1}, DType::kI64), finite = Tensor::empty({2}, DType::kI32);
  checksum.data<int64_t>()[0] = static_cast<int64_t>(ops::keyed_checksum(ctx, x));
  finite.data<int32_t>()[0] = ops::all_finite(ctx, x);
  Outputs out{{"l2_norm", scalar(ops::l2_norm(ctx, x))}, {"keyed_checksum", checksum}};
  Tensor with_inf = rng.normal({1001});
  with_inf.data<float>()[517] = INFINITY;
  finite.data<int32_t>()[1] = ops::all_finite(ctx, on(ctx, with_inf));
  out.push_back({"all_finite", finite});
  return out;
}

std::vector<int32_t> random_ids(Rng& rng, int64_t n, int32_t lo, int32_t hi) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = rng.uniform_int(lo, hi);
  return ids;
}

// A table of `dtype` holding every bit pattern of it but NaN's (random_bits): rows widened exactly.
Outputs run_embedding_forward(const ExecContext& ctx, DType dtype) {
  Rng rng(kSeed);
  const Tensor table = on(ctx, random_bits(rng, 33 * 54, dtype).reshape({33, 54}));
  const Tensor ids = ints(ctx, random_ids(rng, 17, 0, 32));
  Tensor out = poisoned(ctx, {17, 54});
  ops::embedding_forward(ctx, table, ids, out);
  return {{"out", back(ctx, out)}};
}

Outputs run_embedding_backward(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const Tensor ids = ints(ctx, random_ids(rng, 17, 0, 32));  // repeats among them: the backward adds
  Tensor dtable = on(ctx, rng.normal({33, 54}));
  ops::embedding_backward(ctx, on(ctx, rng.normal({17, 54})), ids, dtable);
  return {{"dtable", back(ctx, dtable)}};
}

Outputs run_rmsnorm(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const Tensor x = on(ctx, rng.normal({17, 97})), w = on(ctx, rng.normal({97}));
  Outputs out;
  for (const DType round : {DType::kF32, DType::kBF16, DType::kF16}) {
    Tensor y = poisoned(ctx, {17, 97}), rstd = poisoned(ctx, {17});
    ops::rmsnorm_forward(ctx, x, w, 1e-5f, y, rstd, round);
    out.push_back({std::string("out rounded to ") + dtype_name(round), back(ctx, y)});
    out.push_back({"rstd", back(ctx, rstd)});
  }
  Tensor y = poisoned(ctx, {17, 97}), rstd = poisoned(ctx, {17});
  ops::rmsnorm_forward(ctx, x, w, 1e-5f, y, rstd);
  Tensor dx = on(ctx, rng.normal({17, 97})), dw = on(ctx, rng.normal({97}));
  ops::rmsnorm_backward(ctx, on(ctx, rng.normal({17, 97})), x, w, rstd, dx, dw);
  out.push_back({"dx", back(ctx, dx)});
  out.push_back({"dweight", back(ctx, dw)});
  return out;
}

// q/k/v shapes of the rope and attention cases: 4 query heads over 2 kv heads of 16.
constexpr int64_t kHq = 4, kHkv = 2, kHeadDim = 16, kQkvWidth = (kHq + 2 * kHkv) * kHeadDim;

Outputs run_rope(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const Tensor table = ops::rope_table(ctx, 40, kHeadDim, 1e4f);
  const Tensor positions = ints(ctx, random_ids(rng, 17, 0, 39));
  Tensor x = on(ctx, rng.normal({17, 3, kHeadDim}));
  ops::rope_forward(ctx, x, positions, table);
  Outputs out{{"rotated", back(ctx, x)}};
  ops::rope_backward(ctx, x, positions, table);
  out.push_back({"rotated back", back(ctx, x)});
  const Tensor qkv = on(ctx, rng.normal({17, kQkvWidth}));
  Tensor q = poisoned(ctx, {17, kHq, kHeadDim}), k = poisoned(ctx, {17, kHkv, kHeadDim});
  Tensor v = poisoned(ctx, {17, kHkv, kHeadDim}), dqkv = poisoned(ctx, {17, kQkvWidth});
  ops::rope_split_qkv(ctx, qkv, positions, table, q, k, v);
  out.push_back({"rope_split q", back(ctx, q)});
  out.push_back({"rope_split k", back(ctx, k)});
  out.push_back({"rope_split v", back(ctx, v)});
  ops::rope_backward_merge_qkv(ctx, q, k, v, positions, table, dqkv);
  out.push_back({"rope_backward_merge dqkv", back(ctx, dqkv)});
  ops::split_qkv(ctx, qkv, q, k, v);
  out.push_back({"split q", back(ctx, q)});
  out.push_back({"split v", back(ctx, v)});
  ops::merge_qkv(ctx, q, k, v, dqkv);
  out.push_back({"merged", back(ctx, dqkv)});
  return out;
}

Outputs run_attention(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const int64_t n = 29;  // three sequences of 5, 12 and 12 rows
  const Tensor cu = ints(ctx, {0, 5, 17, 29});
  const Tensor q = on(ctx, rng.normal({n, kHq, kHeadDim})), k = on(ctx, rng.normal({n, kHkv, kHeadDim}));
  const Tensor v = on(ctx, rng.normal({n, kHkv, kHeadDim}));
  const float scale = 0.25f;
  Tensor o = poisoned(ctx, {n, kHq, kHeadDim}), lse = poisoned(ctx, {n, kHq});
  ops::attention_forward(ctx, q, k, v, cu, scale, o, lse);
  Tensor dq = poisoned(ctx, q.shape()), dk = poisoned(ctx, k.shape()), dv = poisoned(ctx, v.shape());
  ops::attention_backward(ctx, on(ctx, rng.normal({n, kHq, kHeadDim})), q, k, v, o, lse, cu, scale, dq, dk, dv);
  return {{"out", back(ctx, o)}, {"lse", back(ctx, lse)}, {"dq", back(ctx, dq)}, {"dk", back(ctx, dk)},
          {"dv", back(ctx, dv)}};
}

// A paged cache of 8 blocks of 4 slots: two sequences' keys written through slot mappings (block tables {5, 1, 6}
// and {2, 7}; a -1 skipped), then query rows of both at several positions.
Outputs run_paged(const ExecContext& ctx, DType cache_dtype) {
  Rng rng(kSeed);
  const int64_t block = 4, slots = 8 * block;
  std::vector<int32_t> slot_mapping;
  for (int t = 0; t < 11; ++t) slot_mapping.push_back(std::vector<int32_t>{5, 1, 6}[t / 4] * 4 + t % 4);
  for (int t = 0; t < 7; ++t) slot_mapping.push_back(t == 3 ? -1 : std::vector<int32_t>{2, 7}[t / 4] * 4 + t % 4);
  const int64_t n = static_cast<int64_t>(slot_mapping.size());
  Tensor k_cache = ctx.zeros({slots, kHkv, kHeadDim}, cache_dtype), v_cache = ctx.zeros({slots, kHkv, kHeadDim}, cache_dtype);
  ops::paged_kv_write(ctx, on(ctx, rng.normal({n, kHkv, kHeadDim})), on(ctx, rng.normal({n, kHkv, kHeadDim})),
                      ints(ctx, slot_mapping), k_cache, v_cache);
  // The skipped slot (sequence 1, position 3) holds zeros: queries of sequence 1 stop before it.
  const Tensor query_seq = ints(ctx, {0, 0, 0, 1, 1}), query_pos = ints(ctx, {0, 6, 10, 1, 2});
  Tensor out = poisoned(ctx, {5, kHq, kHeadDim});
  ops::paged_attention(ctx, on(ctx, rng.normal({5, kHq, kHeadDim})), k_cache, v_cache, query_seq, query_pos,
                       ints(ctx, {0, 3, 5}), ints(ctx, {5, 1, 6, 2, 7}), block, 0.25f, out);
  return {{"k_cache", back(ctx, k_cache)}, {"v_cache", back(ctx, v_cache)}, {"out", back(ctx, out)}};
}

Outputs run_swiglu(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const Tensor gate_up = on(ctx, rng.normal({17, 2 * 54}, 2.0f)), dout = on(ctx, rng.normal({17, 54}));
  Tensor out = poisoned(ctx, {17, 54}), dgate_up = poisoned(ctx, {17, 2 * 54}), act = poisoned(ctx, {17, 54});
  ops::swiglu_forward(ctx, gate_up, out);
  Outputs result{{"out", back(ctx, out)}};
  ops::swiglu_backward(ctx, dout, gate_up, dgate_up);
  result.push_back({"dgate_up", back(ctx, dgate_up)});
  ops::swiglu_backward(ctx, dout, gate_up, dgate_up, act);
  result.push_back({"dgate_up with act", back(ctx, dgate_up)});
  result.push_back({"act", back(ctx, act)});
  return result;
}

Outputs run_logprob(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const Tensor logits = on(ctx, rng.normal({17, 97}, 3.0f));
  std::vector<int32_t> target_values = random_ids(rng, 17, 0, 96);
  target_values[4] = -1;  // a row without a target
  const Tensor targets = ints(ctx, target_values);
  Tensor logp = poisoned(ctx, {17}), lse = poisoned(ctx, {17}), entropy = poisoned(ctx, {17});
  ops::logprob_forward(ctx, logits, targets, 0.7f, logp, lse, &entropy);
  Tensor dlogits = poisoned(ctx, {17, 97});
  const Tensor dentropy = on(ctx, rng.normal({17}));
  ops::logprob_backward(ctx, on(ctx, rng.normal({17})), &dentropy, logits, targets, 0.7f, lse, dlogits);
  return {{"logp", back(ctx, logp)}, {"lse", back(ctx, lse)}, {"entropy", back(ctx, entropy)},
          {"dlogits", back(ctx, dlogits)}};
}

Outputs run_logprob_truncated(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  const Tensor logits = on(ctx, rng.normal({17, 97}, 3.0f));
  std::vector<int32_t> target_values = random_ids(rng, 17, 0, 96);
  target_values[4] = -1;
  const Tensor targets = ints(ctx, target_values);
  const Truncation t{20, 0.9f};
  Tensor logp = poisoned(ctx, {17}), lse = poisoned(ctx, {17}), dlogits = poisoned(ctx, {17, 97});
  ops::logprob_truncated_forward(ctx, logits, targets, 0.7f, t, logp, lse);
  ops::logprob_truncated_backward(ctx, on(ctx, rng.normal({17})), logits, targets, 0.7f, t, lse, dlogits);
  return {{"logp", back(ctx, logp)}, {"lse", back(ctx, lse)}, {"dlogits", back(ctx, dlogits)}};
}

Outputs run_adamw(const ExecContext& ctx, DType) {
  Rng rng(kSeed);
  Tensor param = on(ctx, rng.normal({1001})), m = ctx.zeros({1001}), v = ctx.zeros({1001});
  ops::AdamWParams p;
  p.lr = 1e-2f;
  p.weight_decay = 0.1f;
  for (int64_t step = 1; step <= 2; ++step) ops::adamw_step(ctx, param, on(ctx, rng.normal({1001})), m, v, p, step);
  return {{"param", back(ctx, param)}, {"m", back(ctx, m)}, {"v", back(ctx, v)}};
}

// ---------------------------------------------------------------- the matrix

struct OpRun {
  std::vector<Op> ops;  // the ops this run exercises (the first decides the dtypes)
  std::function<Outputs(const ExecContext&, DType)> run;
};

const std::vector<OpRun>& op_runs() {
  static const std::vector<OpRun> runs = {
      {{Op::kMatmul}, run_matmul},
      {{Op::kPackWeight}, run_pack_weight},
      {{Op::kPackWeightTransposed}, run_pack_weight_transposed},
      {{Op::kMatmulPacked, Op::kPackWeight}, run_matmul_packed},
      {{Op::kRoundTo}, run_round_to},
      {{Op::kConvert}, run_convert},
      {{Op::kLinearWeightGrad}, run_linear_weight_grad},
      {{Op::kAddBias}, run_add_bias},
      {{Op::kBiasBackward}, run_bias_backward},
      {{Op::kAddInplace, Op::kScaleInplace}, run_elementwise},
      {{Op::kL2Norm, Op::kKeyedChecksum, Op::kAllFinite}, run_reductions},
      {{Op::kEmbeddingForward}, run_embedding_forward},
      {{Op::kEmbeddingBackward}, run_embedding_backward},
      {{Op::kRmsnormForward, Op::kRmsnormBackward}, run_rmsnorm},
      {{Op::kRopeForward, Op::kRopeBackward, Op::kRopeSplitQkv, Op::kRopeBackwardMergeQkv, Op::kSplitQkv,
        Op::kMergeQkv},
       run_rope},
      {{Op::kAttentionForward, Op::kAttentionBackward}, run_attention},
      {{Op::kPagedKvWrite, Op::kPagedAttention}, run_paged},
      {{Op::kSwigluForward, Op::kSwigluBackward}, run_swiglu},
      {{Op::kLogprobForward, Op::kLogprobBackward}, run_logprob},
      {{Op::kLogprobTruncatedForward, Op::kLogprobTruncatedBackward}, run_logprob_truncated},
      {{Op::kAdamwStep}, run_adamw},
  };
  return runs;
}

const DType kDtypes[] = {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16, DType::kInt8, DType::kFp8E4M3};

// Where every backend promises the reference's bits: packing, the packed product, roundings and conversions,
// copies and index ops, sums modulo 2^64, finiteness. The CPU also sums a weight gradient in the reference's
// order (one fma chain per output over the rows).
bool promises_bits(Op op, const std::string& backend, const std::string& output) {
  switch (op) {
    case Op::kPackWeight:
    case Op::kPackWeightTransposed:
    case Op::kMatmulPacked:
    case Op::kRoundTo:
    case Op::kConvert:
    case Op::kAddBias:
    case Op::kAddInplace:
    case Op::kEmbeddingForward:
    case Op::kSplitQkv:
    case Op::kAllFinite:
      return true;
    case Op::kL2Norm: return output != "l2_norm";           // the checksum and finiteness of the same run
    case Op::kPagedKvWrite: return output != "out";         // the cache bytes; attention is a sum
    case Op::kLinearWeightGrad: return backend == "cpu";
    default: return false;
  }
}

// Mantissa bits of a product's math (the operands' rounding), for a tolerance relative to the output's magnitude.
double math_tolerance(DType math) {
  switch (math) {
    case DType::kTF32: return std::ldexp(1.0, -9);
    case DType::kBF16: return std::ldexp(1.0, -6);
    case DType::kF16: return std::ldexp(1.0, -9);
    default: return 1e-5;
  }
}

// fp32 ops of long reductions or other summation orders: the attention backward and the log-prob gradients sum
// over rows and vocabulary in orders of their own.
double fp32_tolerance(Op op) {
  switch (op) {
    case Op::kAttentionForward:
    case Op::kAttentionBackward:
    case Op::kPagedKvWrite:
    case Op::kLogprobForward:
    case Op::kLogprobTruncatedForward:
    case Op::kSwigluForward:
    case Op::kRmsnormForward: return 2e-5;
    default: return 1e-5;
  }
}

// One unit in the last place of a 16-bit output, relative (at worst 2^-7 for bf16's 8 mantissa bits, 2^-10 for
// fp16's 11): two backends that sum in other orders may round a value to neighbouring 16-bit numbers.
double storage_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return std::ldexp(1.0, -7);
    case DType::kF16: return std::ldexp(1.0, -10);
    default: return 0;
  }
}

void compare(const Output& got, const Output& want, bool bits, double tolerance, const std::string& what) {
  ASSERT_EQ(got.name, want.name) << what;
  ASSERT_EQ(got.value.shape(), want.value.shape()) << what << " " << got.name;
  ASSERT_EQ(got.value.dtype(), want.value.dtype()) << what << " " << got.name;
  if (bits || got.value.dtype() != DType::kF32) {
    EXPECT_EQ(std::memcmp(got.value.raw(), want.value.raw(), got.value.nbytes()), 0)
        << what << ": " << got.name << " differs from the reference's bits";
    return;
  }
  const float* g = got.value.data<float>();
  const float* w = want.value.data<float>();
  double scale = 1.0;
  for (int64_t i = 0; i < want.value.numel(); ++i) scale = std::max(scale, std::fabs(double(w[i])));
  int misses = 0;
  for (int64_t i = 0; i < want.value.numel(); ++i)
    if (!(std::fabs(double(g[i]) - w[i]) <= tolerance * scale) && ++misses <= 3)  // NaN fails
      ADD_FAILURE() << what << ": " << got.name << "[" << i << "] = " << g[i] << ", reference " << w[i]
                    << " (tolerance " << tolerance * scale << ")";
  EXPECT_EQ(misses, 0) << what << ": " << got.name;
}

struct MatrixCase {
  std::string backend;
  size_t run;
  DType dtype;
};

std::vector<MatrixCase> matrix_cases() {
  std::vector<MatrixCase> cases;
  for (const std::string& backend : ops::backend_names()) {
    if (backend == "reference") continue;
    for (size_t r = 0; r < op_runs().size(); ++r)
      for (const DType d : kDtypes)
        if (ops::backend_named(backend).supports(op_runs()[r].ops.front(), d)) cases.push_back({backend, r, d});
  }
  return cases;
}

void PrintTo(const MatrixCase& c, std::ostream* os) {
  *os << c.backend << " " << ops::op_name(op_runs()[c.run].ops.front()) << " " << precision_name(c.dtype);
}

class OpMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(OpMatrix, EqualsTheReference) {
  const MatrixCase& c = GetParam();
  const OpRun& run = op_runs()[c.run];
  const Op op = run.ops.front();
  std::string why;
  if (c.backend == "cuda" && ExecContext::cuda_devices(&why) == 0) GTEST_SKIP() << why;
  const ExecContext ctx = c.backend == "cuda" ? ExecContext::cuda(0) : ExecContext::cpu().on_backend(c.backend);
  const ExecContext reference = ExecContext::cpu().on_backend("reference");
  // The reference's result in the same dtype, or for a math it does not run (tensor-core modes) its fp32 result
  // within that math's rounding.
  const bool same_math = ops::backend_of(reference).supports(op, c.dtype);
  ASSERT_TRUE(same_math || op == Op::kMatmul || op == Op::kLinearWeightGrad)
      << "the reference backend must define " << op_name(op) << " in " << precision_name(c.dtype);
  const Outputs want = run.run(reference, same_math ? c.dtype : DType::kF32);
  const Outputs got = run.run(ctx, c.dtype);
  ASSERT_EQ(got.size(), want.size());
  const std::string what = c.backend + " " + op_name(op) + " " + precision_name(c.dtype);
  for (size_t i = 0; i < got.size(); ++i) {
    const bool bits = same_math && promises_bits(op, c.backend, got[i].name);
    const double tolerance =
        same_math ? std::max(fp32_tolerance(op), storage_tolerance(c.dtype)) : math_tolerance(c.dtype);
    compare(got[i], want[i], bits, tolerance, what);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, OpMatrix, ::testing::ValuesIn(matrix_cases()),
                         [](const ::testing::TestParamInfo<MatrixCase>& info) {
                           std::string name = info.param.backend + "_" +
                                              ops::op_name(op_runs()[info.param.run].ops.front()) + "_" +
                                              precision_name(info.param.dtype);
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// Every op of the backend table is exercised by some run of the matrix.
TEST(OpMatrix, CoversEveryOp) {
  std::vector<bool> covered(static_cast<size_t>(Op::kCount), false);
  for (const OpRun& run : op_runs())
    for (const Op op : run.ops) covered[static_cast<size_t>(op)] = true;
  for (size_t i = 0; i < covered.size(); ++i)
    EXPECT_TRUE(covered[i]) << ops::op_name(static_cast<Op>(i)) << " is in no run of the op matrix";
}

// Each backend runs at least its fp32 ops; cases are made only for the pairs it says it runs.
TEST(OpMatrix, EveryBackendRunsEveryOpInFp32OrSaysItDoesNot) {
  for (const std::string& name : ops::backend_names()) {
    const ops::Backend& b = ops::backend_named(name);
    EXPECT_EQ(std::string(b.name), name);
    EXPECT_TRUE(b.supports(Op::kMatmul, DType::kF32) && b.supports(Op::kAttentionForward, DType::kF32)) << name;
    EXPECT_FALSE(b.supports(Op::kAddInplace, DType::kI32)) << name;
  }
}

// An (op, dtype) pair a backend does not run is refused naming both, before any kernel runs.
TEST(OpMatrix, AnUnsupportedPairIsRefusedNamingOpDtypeAndBackend) {
  Tensor x = testing::filled({4, 4}, 1.0f), y = Tensor::empty({4, 4});
  try {
    ops::matmul(ExecContext::cpu(), x, false, x, false, y, 1.0f, 0.0f, DType::kTF32);
    ADD_FAILURE() << "tf32 math ran on the cpu backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op matmul: tf32 not supported on the cpu backend"), std::string::npos)
        << e.what();
  }
  try {
    ExecContext::cpu().on_backend("tpu");
    ops::scale_inplace(ExecContext::cpu().on_backend("tpu"), x, 2.0f);
    ADD_FAILURE() << "a backend that does not exist ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no backend named 'tpu'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlcpp
