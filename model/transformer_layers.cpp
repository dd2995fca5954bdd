// The training forward and backward of the Transformer's layers, one chunk of rows (whole sequences) at a time.
//
// On the CPU a layer runs chunk by chunk, the chunks split between the threads (one OpenMP region per layer):
// a chunk's activations and activation gradients stay in the core's L2 cache from one op to the next instead
// of streaming the whole batch through memory once per op, the element-wise ops run on both cores with no
// fork and join between them, and the weight-gradient products accumulate per thread (K = a chunk's rows) and
// are summed in thread order at the end of the layer. Every op works row by row (or sequence by sequence), so
// the forward's values are the bits the whole batch at once gives, and the same as forward_cached's; the
// weight gradients are summed in an order fixed by the batch and the thread count.
//
// A bf16/fp16 model keeps its activations in that dtype (transformer.h LayerActivations) and computes on F32
// rows of them: a chunk's forward runs into F32 chunk buffers and stores the rows it keeps with ops::convert; the
// next layer, and the backward, widen the kept rows back. The values kept are already rounded to the dtype at
// the op that made them, so storing and widening are exact: the bits are those of an F32 store. A forward that
// no backward follows keeps nothing: every dtype computes on the F32 chunk rows, the residual stream in place.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/layer_ops.h"
#include "model/transformer_weights.h"

namespace rlcpp {

using namespace layer_ops;

namespace {

int64_t max_chunk_rows(const std::vector<RowChunk>& chunks) {
  int64_t rows = 0;
  for (const auto& c : chunks) rows = std::max(rows, c.end - c.begin);
  return rows;
}

// The buffers a chunk of `rows` rows needs through one layer's forward (and again in the backward).
void ensure_chunk_buffers(const ExecContext& ctx, ChunkScratch& s, int64_t rows, const ModelConfig& c) {
  ensure(ctx, s.xn, {rows, c.hidden_size});
  ensure(ctx, s.rstd, {rows});
  ensure(ctx, s.qkv, {rows, c.q_dim() + 2 * c.kv_dim()});
  ensure(ctx, s.act, {rows, c.intermediate_size});
}

// The activations kept in the compute dtype (lse, q_rstd and k_rstd stay F32); q_pre and k_pre only with
// Qwen3's q_norm and k_norm.
constexpr Tensor LayerActivations::*kStoredInComputeDtype[] = {
    &LayerActivations::x,     &LayerActivations::h,     &LayerActivations::q,   &LayerActivations::k,
    &LayerActivations::v,     &LayerActivations::q_pre, &LayerActivations::k_pre, &LayerActivations::att,
    &LayerActivations::gate_up};

// The F32 rows of a chunk of the stored activations (ChunkScratch::rows_f32), for chunks of up to `rows` rows;
// with the per-row statistics (lse, q_rstd, k_rstd) for a forward that keeps nothing.
void ensure_rows_f32(const ExecContext& ctx, LayerActivations& f, int64_t rows, const ModelConfig& c,
                     bool with_stats = false) {
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim();
  ensure(ctx, f.x, {rows, c.hidden_size});
  ensure(ctx, f.h, {rows, c.hidden_size});
  ensure(ctx, f.q, {rows, Hq, D});
  ensure(ctx, f.k, {rows, Hkv, D});
  ensure(ctx, f.v, {rows, Hkv, D});
  if (c.has_qk_norm()) {
    ensure(ctx, f.q_pre, {rows, Hq, D});
    ensure(ctx, f.k_pre, {rows, Hkv, D});
  }
  ensure(ctx, f.att, {rows, Hq * D});
  ensure(ctx, f.gate_up, {rows, 2 * c.intermediate_size});
  if (!with_stats) return;
  ensure(ctx, f.lse, {rows, Hq});
  if (c.has_qk_norm()) {
    ensure(ctx, f.q_rstd, {rows, Hq});
    ensure(ctx, f.k_rstd, {rows, Hkv});
  }
}

// Rows [b, e) of the stored activations `member` (all when null) of A widened into rows [0, e-b) of f.
void widen_rows(const ExecContext& ctx, const LayerActivations& A, LayerActivations& f, int64_t b, int64_t e,
                Tensor LayerActivations::*member = nullptr) {
  for (Tensor LayerActivations::*m : kStoredInComputeDtype) {
    if ((member && m != member) || !(A.*m).defined()) continue;
    Tensor rows = (f.*m).slice_rows(0, e - b);
    ops::convert(ctx, (A.*m).slice_rows(b, e), rows);
  }
}

// Rows [0, e-b) of f stored (rounded, exactly: they hold values of the dtype) into rows [b, e) of A, x excepted
// (the layer's input, stored by the layer before).
void store_rows(const ExecContext& ctx, const LayerActivations& f, LayerActivations& A, int64_t b, int64_t e) {
  for (Tensor LayerActivations::*m : kStoredInComputeDtype) {
    if (m == &LayerActivations::x || !(A.*m).defined()) continue;
    Tensor rows = (A.*m).slice_rows(b, e);
    ops::convert(ctx, (f.*m).slice_rows(0, e - b), rows);
  }
}

}  // namespace

void Transformer::layer_body(const ExecContext& ctx, const LayerWeights& W, const PackedWeights::Layer* P, LayerRows& r,
                             const LayerAttention& attend) const {
  const int64_t n = r.x.size(0), Hq = config_.num_attention_heads, Hkv = config_.num_key_value_heads;
  const int64_t D = config_.head_dim();
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const DType dt = numerics_.compute;
  // Biases: the rounded copies of the prepared weights, or the parameters' own (fp32, or the OpenBLAS decode,
  // whose weights are already rounded).
  const Tensor& qkv_b = P && P->qkv_b.defined() ? P->qkv_b : W.qkv_b;
  const Tensor& o_b = P && P->o_b.defined() ? P->o_b : W.o_b;

  // Unmerged adapters (LinearAdapters): their outputs added to a product and rounded again.
  auto adapted = [&](LayerLinear linear) { return r.adapters && r.adapters->adapts(r.layer, linear); };
  auto adapt = [&](LayerLinear linear, const Tensor& in, Tensor& y) {
    r.adapters->add(r.layer, linear, in, y, r.row0);
    ops::round_to(ctx, y, dt);
  };
  // A product into the residual stream: out = round(residual + product), the product adapted first when the
  // layer has adapters (then rounded, adapted and added in three steps instead of the fused kernel's one).
  auto into_residual = [&](LayerLinear linear, const Tensor& in, const Tensor& weight, const ops::PackedWeight* packed,
                           const Tensor& residual, Tensor& out) {
    if (!adapted(linear)) {
      linear_residual(ctx, in, weight, packed, residual, out, dt, r.product);
      return;
    }
    ensure(ctx, r.product, out.shape());
    layer_ops::linear(ctx, in, weight, packed, r.product, dt);
    adapt(linear, in, r.product);
    if (out.raw() != residual.raw()) ctx.copy(residual, out);
    ops::add_inplace(ctx, out, r.product);
    ops::round_to(ctx, out, dt);
  };

  ops::rmsnorm_forward(ctx, r.x, W.ln1, eps, r.xn, r.rstd, dt);
  linear(ctx, r.xn, W.qkv_w, P ? &P->qkv : nullptr, r.qkv, dt);
  if (qkv_b.defined()) {
    ops::add_bias(ctx, r.qkv, qkv_b);
    ops::round_to(ctx, r.qkv, dt);
  }
  if (adapted(LayerLinear::kQkv)) adapt(LayerLinear::kQkv, r.xn, r.qkv);
  if (W.q_norm.defined()) {
    // Qwen3: each head of q and of k through its RMSNorm (rows of D), then RoPE. The norm rounds its output as
    // Hugging Face's Qwen3RMSNorm in that dtype does; RoPE's output is rounded below, as without the norms.
    ops::split_qkv(ctx, r.qkv, r.q_pre, r.k_pre, r.v);
    Tensor q_heads = r.q.reshape({n * Hq, D}), k_heads = r.k.reshape({n * Hkv, D});
    Tensor q_rstd = r.q_rstd.reshape({n * Hq}), k_rstd = r.k_rstd.reshape({n * Hkv});
    ops::rmsnorm_forward(ctx, r.q_pre.reshape({n * Hq, D}), W.q_norm, eps, q_heads, q_rstd, dt);
    ops::rmsnorm_forward(ctx, r.k_pre.reshape({n * Hkv, D}), W.k_norm, eps, k_heads, k_rstd, dt);
    ops::rope_forward(ctx, r.q, r.positions, r.rope);
    ops::rope_forward(ctx, r.k, r.positions, r.rope);
  } else {
    ops::rope_split_qkv(ctx, r.qkv, r.positions, r.rope, r.q, r.k, r.v);
  }
  ops::round_to(ctx, r.q, dt);  // v is a copy of rounded values already
  ops::round_to(ctx, r.k, dt);
  Tensor att3 = r.att.reshape({n, Hq, D});
  attend(r.q, r.k, r.v, att3);
  ops::round_to(ctx, r.att, dt);
  into_residual(LayerLinear::kO, r.att, W.o_w, P ? &P->o : nullptr, r.x, r.h);  // h = x + o_proj(att)
  if (o_b.defined()) {
    ops::add_bias(ctx, r.h, o_b);
    ops::round_to(ctx, r.h, dt);
  }
  ops::rmsnorm_forward(ctx, r.h, W.ln2, eps, r.xn, r.rstd, dt);
  linear(ctx, r.xn, W.gate_up, P ? &P->gate_up : nullptr, r.gate_up, dt);
  if (adapted(LayerLinear::kGateUp)) adapt(LayerLinear::kGateUp, r.xn, r.gate_up);
  ops::swiglu_forward(ctx, r.gate_up, r.act);
  ops::round_to(ctx, r.act, dt);
  into_residual(LayerLinear::kDown, r.act, W.down, P ? &P->down : nullptr, r.h, r.out);  // out = h + down(act)
}

void Transformer::layer_forward(const ExecContext& ctx, const LayerWeights& W, const PackedWeights::Layer* P,
                                LayerActivations& A, Tensor& x_next, const RowChunk& rows, const Tensor& positions,
                                const Tensor& rope, ChunkScratch& s, bool keep, const LinearAdapters* adapters,
                                int64_t layer) const {
  const int64_t b = rows.begin, e = rows.end, n = e - b;
  const float scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim()));
  // fp32 keeping its activations: the kernels write the kept tensors' rows [b, e) themselves. bf16/fp16 keeping
  // them: they compute on the chunk's F32 rows [0, n), the input widened first and the kept rows stored after.
  // Keeping nothing: on the chunk's F32 rows, the input and output the rows of x_next (the F32 residual stream).
  const bool in_kept = keep && storage_dtype(numerics_.compute) == DType::kF32;
  LayerActivations& R = in_kept ? A : s.rows_f32;
  const int64_t rb = in_kept ? b : 0, re = in_kept ? e : n;
  LayerActivations& stats = keep ? A : s.rows_f32;  // lse, q_rstd, k_rstd
  const int64_t sb = keep ? b : 0, se = keep ? e : n;
  if (keep && !in_kept) widen_rows(ctx, A, R, b, e, &LayerActivations::x);
  LayerRows r;
  r.x = keep ? R.x.slice_rows(rb, re) : x_next.slice_rows(b, e);
  r.h = R.h.slice_rows(rb, re);
  // An F32 x_next (fp32, the last layer's x_final, the residual stream of a forward keeping nothing) is written
  // in place; else the output goes to the chunk's x rows (not read after h is formed, as the cached decode's
  // residual stream) and is stored from there.
  const bool out_in_place = x_next.dtype() == DType::kF32;
  r.out = out_in_place ? x_next.slice_rows(b, e) : r.x;
  r.positions = positions.slice_rows(b, e);
  r.rope = rope;
  r.q = R.q.slice_rows(rb, re);
  r.k = R.k.slice_rows(rb, re);
  r.v = R.v.slice_rows(rb, re);
  if (config_.has_qk_norm()) {
    r.q_pre = R.q_pre.slice_rows(rb, re);
    r.k_pre = R.k_pre.slice_rows(rb, re);
    r.q_rstd = stats.q_rstd.slice_rows(sb, se);
    r.k_rstd = stats.k_rstd.slice_rows(sb, se);
  }
  r.att = R.att.slice_rows(rb, re);
  r.gate_up = R.gate_up.slice_rows(rb, re);
  r.xn = s.xn.slice_rows(0, n);
  r.rstd = s.rstd.slice_rows(0, n);
  r.qkv = s.qkv.slice_rows(0, n);
  r.act = s.act.slice_rows(0, n);
  r.adapters = adapters;
  r.layer = layer;
  r.row0 = b;
  Tensor lse = stats.lse.slice_rows(sb, se);
  layer_body(ctx, W, P, r, [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor& att) {
    ops::attention_forward(ctx, q, k, v, rows.cu_seqlens, scale, att, lse);
  });
  if (in_kept || !keep) return;
  store_rows(ctx, R, A, b, e);
  if (!out_in_place) {
    Tensor next = x_next.slice_rows(b, e);
    ops::convert(ctx, r.out, next);
  }
}

void Transformer::layer_backward(const ExecContext& ctx, const LayerWeights& W, const PackedWeights::Layer* P,
                                 LayerWeights& G, const LayerActivations& A, Tensor& dx_all, const RowChunk& rows,
                                 const Tensor& positions, const Tensor& rope, ChunkScratch& s,
                                 const FrozenChunk* frozen) const {
  const int64_t b = rows.begin, e = rows.end, n = e - b;
  const int64_t Hq = config_.num_attention_heads, Hkv = config_.num_key_value_heads, D = config_.head_dim();
  const float eps = static_cast<float>(config_.rms_norm_eps), scale = 1.0f / std::sqrt(static_cast<float>(D));
  // fp32: the kept tensors' rows [b, e) are read in place. bf16/fp16: widened into the chunk's F32 rows [0, n).
  const bool stored_f32 = storage_dtype(numerics_.compute) == DType::kF32;
  if (!stored_f32) widen_rows(ctx, A, s.rows_f32, b, e);
  const LayerActivations& R = stored_f32 ? A : s.rows_f32;
  const int64_t rb = stored_f32 ? b : 0, re = stored_f32 ? e : n;
  const Tensor x = R.x.slice_rows(rb, re), pos = positions.slice_rows(b, e);
  const Tensor q = R.q.slice_rows(rb, re), k = R.k.slice_rows(rb, re), v = R.v.slice_rows(rb, re);
  const Tensor att = R.att.slice_rows(rb, re), lse = A.lse.slice_rows(b, e), h = R.h.slice_rows(rb, re);
  const Tensor gate_up = R.gate_up.slice_rows(rb, re);
  Tensor dx = dx_all.slice_rows(b, e);
  Tensor xn = s.xn.slice_rows(0, n), rstd = s.rstd.slice_rows(0, n), act = s.act.slice_rows(0, n);
  Tensor dxn = s.dxn.slice_rows(0, n), dact = s.dact.slice_rows(0, n), dgate_up = s.dgate_up.slice_rows(0, n);
  Tensor datt = s.datt.slice_rows(0, n), dq = s.dq.slice_rows(0, n), dk = s.dk.slice_rows(0, n);
  Tensor dv = s.dv.slice_rows(0, n), dqkv = s.dqkv.slice_rows(0, n);
  // A Linear layer's weight gradient dw += dy^T x, or, frozen, dy and x handed to the adapters' hook.
  auto weight_grad = [&](LayerLinear linear, const Tensor& dy, const Tensor& in, Tensor& dw) {
    if (frozen)
      frozen->hook->add(frozen->layer, linear, dy, in, frozen->grads, b);
    else
      linear_weight_grad(ctx, dy, in, dw, numerics_.compute);
  };
  // A Linear layer's input gradient dx = dy·W, and the unmerged adapters' share of it.
  auto input_grad = [&](LayerLinear linear, const Tensor& dy, const Tensor& w, const ops::PackedWeight* packed_t,
                        Tensor& d_in) {
    linear_input_grad(ctx, dy, w, packed_t, d_in, numerics_.compute);
    const LinearAdapters* adapters = frozen ? frozen->adapters : nullptr;
    if (adapters && adapters->adapts(frozen->layer, linear))
      adapters->add_input_grad(frozen->layer, linear, dy, d_in, b);
  };

  // MLP: x_next = h + down(swiglu(gate_up(norm2(h)))); dx holds d/dx_next. act and norm2(h) are recomputed.
  input_grad(LayerLinear::kDown, dx, W.down, P ? &P->down : nullptr, dact);
  ops::swiglu_backward(ctx, dact, gate_up, dgate_up, act);
  ops::round_to(ctx, act, numerics_.compute);  // the forward's act
  weight_grad(LayerLinear::kDown, dx, act, G.down);
  ops::rmsnorm_forward(ctx, h, W.ln2, eps, xn, rstd, numerics_.compute);
  weight_grad(LayerLinear::kGateUp, dgate_up, xn, G.gate_up);
  input_grad(LayerLinear::kGateUp, dgate_up, W.gate_up, P ? &P->gate_up : nullptr, dxn);
  ops::rmsnorm_backward(ctx, dxn, h, W.ln2, rstd, dx, G.ln2);  // dx is now d/dh
  // Attention: h = x + o(attn(rope(qkv(norm1(x))))) (Qwen3: rope(qk_norm(.)) on q and k); norm1(x) is recomputed.
  input_grad(LayerLinear::kO, dx, W.o_w, P ? &P->o : nullptr, datt);
  weight_grad(LayerLinear::kO, dx, att, G.o_w);
  if (G.o_b.defined()) ops::bias_backward(ctx, dx, G.o_b);
  ops::attention_backward(ctx, datt.reshape({n, Hq, D}), q, k, v, att.reshape({n, Hq, D}), lse, rows.cu_seqlens, scale,
                          dq, dk, dv);
  if (W.q_norm.defined()) {
    // Through RoPE, then through q_norm and k_norm (rows of D) at the kept pre-norm q, k and rstd.
    ops::rope_backward(ctx, dq, pos, rope);
    ops::rope_backward(ctx, dk, pos, rope);
    Tensor dq_pre = s.dq_pre.slice_rows(0, n), dk_pre = s.dk_pre.slice_rows(0, n);
    ctx.fill_zero(dq_pre);  // rmsnorm_backward accumulates dx
    ctx.fill_zero(dk_pre);
    Tensor dq_pre_heads = dq_pre.reshape({n * Hq, D}), dk_pre_heads = dk_pre.reshape({n * Hkv, D});
    ops::rmsnorm_backward(ctx, dq.reshape({n * Hq, D}), R.q_pre.slice_rows(rb, re).reshape({n * Hq, D}), W.q_norm,
                          A.q_rstd.slice_rows(b, e).reshape({n * Hq}), dq_pre_heads, G.q_norm);
    ops::rmsnorm_backward(ctx, dk.reshape({n * Hkv, D}), R.k_pre.slice_rows(rb, re).reshape({n * Hkv, D}), W.k_norm,
                          A.k_rstd.slice_rows(b, e).reshape({n * Hkv}), dk_pre_heads, G.k_norm);
    ops::merge_qkv(ctx, dq_pre, dk_pre, dv, dqkv);
  } else {
    ops::rope_backward_merge_qkv(ctx, dq, dk, dv, pos, rope, dqkv);
  }
  if (G.qkv_b.defined()) ops::bias_backward(ctx, dqkv, G.qkv_b);
  ops::rmsnorm_forward(ctx, x, W.ln1, eps, xn, rstd, numerics_.compute);
  weight_grad(LayerLinear::kQkv, dqkv, xn, G.qkv_w);
  input_grad(LayerLinear::kQkv, dqkv, W.qkv_w, P ? &P->qkv : nullptr, dxn);
  ops::rmsnorm_backward(ctx, dxn, x, W.ln1, rstd, dx, G.ln1);  // dx is now d/dx of this block
}

void Transformer::forward_layers(const ExecContext& ctx, const Weights& w, PackedWeights::Layer* packed,
                                 Activations& acts, bool keep) const {
  const Executor& ex = executor_of(ctx);
  const int64_t N = acts.num_tokens, C = config_.hidden_size, F = config_.intermediate_size;
  const int64_t Hq = config_.num_attention_heads, Hkv = config_.num_key_value_heads, D = config_.head_dim();
  // The kept activations' dtype (x_final, lse and the rstds: F32; tf32 keeps fp32).
  const DType dt = storage_dtype(numerics_.compute);
  for (int64_t l = 0; keep && l < config_.num_hidden_layers; ++l) {
    auto& A = acts.layers[static_cast<size_t>(l)];
    const bool last = l + 1 == config_.num_hidden_layers;
    Tensor& x_next = last ? acts.x_final : acts.layers[static_cast<size_t>(l) + 1].x;
    ensure(ctx, A.h, {N, C}, dt);
    ensure(ctx, x_next, {N, C}, last ? DType::kF32 : dt);
    ensure(ctx, A.q, {N, Hq, D}, dt);
    ensure(ctx, A.k, {N, Hkv, D}, dt);
    ensure(ctx, A.v, {N, Hkv, D}, dt);
    if (config_.has_qk_norm()) {
      ensure(ctx, A.q_pre, {N, Hq, D}, dt);
      ensure(ctx, A.k_pre, {N, Hkv, D}, dt);
      ensure(ctx, A.q_rstd, {N, Hq});
      ensure(ctx, A.k_rstd, {N, Hkv});
    }
    ensure(ctx, A.att, {N, Hq * D}, dt);
    ensure(ctx, A.lse, {N, Hq});
    ensure(ctx, A.gate_up, {N, 2 * F}, dt);
  }
  acts.chunk_scratch.resize(static_cast<size_t>(ex.chunk_threads()));
  const int64_t rows = max_chunk_rows(acts.chunks);
  for (auto& s : acts.chunk_scratch) {
    ensure_chunk_buffers(ctx, s, rows, config_);
    if (dt != DType::kF32 || !keep) ensure_rows_f32(ctx, s.rows_f32, rows, config_, /*with_stats=*/!keep);
  }
  const Tensor& rope = ex.resident(ctx, rope_, acts.rope);
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    auto& A = acts.layers[static_cast<size_t>(l)];
    Tensor& x_next =
        keep && l + 1 < config_.num_hidden_layers ? acts.layers[static_cast<size_t>(l) + 1].x : acts.x_final;
    const LayerWeights& W = w.layers[static_cast<size_t>(l)];
    if (packed) pack_layer(ctx, W, *packed, /*transposed=*/false);
    const PackedWeights::Layer* P = packed;
    ex.run_forward_chunks(static_cast<int64_t>(acts.chunks.size()), [&](int64_t c, int t) {
      layer_forward(ctx, W, P, A, x_next, acts.chunks[static_cast<size_t>(c)], acts.positions, rope,
                    acts.chunk_scratch[static_cast<size_t>(t)], keep, acts.adapters, l);
    });
  }
}

void Transformer::backward_layers(const ExecContext& ctx, const Weights& w, PackedWeights::Layer* packed, Weights& g,
                                  Activations& acts, const GradsReadyFn& ready, FrozenGradients* frozen) const {
  const Executor& ex = executor_of(ctx);
  const int64_t C = config_.hidden_size, F = config_.intermediate_size;
  const int64_t Hq = config_.num_attention_heads, Hkv = config_.num_key_value_heads, D = config_.head_dim();
  const int64_t qkv_dim = config_.q_dim() + 2 * config_.kv_dim();
  acts.chunk_scratch.resize(static_cast<size_t>(ex.chunk_threads()));
  const int64_t rows = max_chunk_rows(acts.chunks);
  const int64_t span = layer_offsets_.empty() ? 0 : layer_offsets_[0].end - layer_offsets_[0].begin;
  const Tensor& rope = ex.resident(ctx, rope_, acts.rope);
  for (auto& s : acts.chunk_scratch) {
    ensure_chunk_buffers(ctx, s, rows, config_);
    if (storage_dtype(numerics_.compute) != DType::kF32) ensure_rows_f32(ctx, s.rows_f32, rows, config_);
    ensure(ctx, s.dxn, {rows, C});
    ensure(ctx, s.dact, {rows, F});
    ensure(ctx, s.dgate_up, {rows, 2 * F});
    ensure(ctx, s.datt, {rows, Hq * D});
    ensure(ctx, s.dq, {rows, Hq, D});
    ensure(ctx, s.dk, {rows, Hkv, D});
    ensure(ctx, s.dv, {rows, Hkv, D});
    ensure(ctx, s.dqkv, {rows, qkv_dim});
    if (config_.has_qk_norm()) {
      ensure(ctx, s.dq_pre, {rows, Hq, D});
      ensure(ctx, s.dk_pre, {rows, Hkv, D});
    }
    // A frozen model's norm and bias gradients: written only where those lie (a few pages), never read.
    if (frozen) ensure(ctx, s.frozen_dump, {span});
  }
  for (int64_t l = config_.num_hidden_layers - 1; l >= 0; --l) {
    const LayerOffsets& o = layer_offsets_[static_cast<size_t>(l)];
    RLCPP_CHECK(o.end - o.begin == span, "backward: layer " << l << " has " << o.end - o.begin
                                                              << " parameters, layer 0 " << span);
    const LayerWeights& W = w.layers[static_cast<size_t>(l)];
    if (packed) pack_layer(ctx, W, *packed, /*transposed=*/true);
    const PackedWeights::Layer* P = packed;
    if (frozen) {
      // The products' gradients go to the hook's span of the layer, each thread's chunks into a buffer of its own
      // (added in thread order); the norms' and biases' into each thread's dump, never read.
      const auto [f_span, f_len] = frozen->layer_span(l);
      ex.run_backward_chunks(ctx, static_cast<int64_t>(acts.chunks.size()), acts.chunk_scratch, f_span, f_len,
                             [&](int64_t c, int t, float* grads) {
                               ChunkScratch& s = acts.chunk_scratch[static_cast<size_t>(t)];
                               LayerWeights dump = layer_views(l, s.frozen_dump.data<float>(), s.frozen_dump.device());
                               const FrozenChunk chunk{frozen, l, grads, acts.adapters};
                               layer_backward(ctx, W, P, dump, acts.layers[static_cast<size_t>(l)], acts.scratch.dx,
                                              acts.chunks[static_cast<size_t>(c)], acts.positions, rope, s, &chunk);
                             });
      continue;
    }
    LayerWeights& G = g.layers[static_cast<size_t>(l)];
    // The executor runs the chunks: each thread's chunks accumulate into the span it is given (G's own, or a
    // buffer of the thread's that the executor adds into G's in thread order).
    float* g_span = G.ln1.data<float>() - (o.ln1 - o.begin);
    ex.run_backward_chunks(ctx, static_cast<int64_t>(acts.chunks.size()), acts.chunk_scratch, g_span, span,
                           [&](int64_t c, int t, float* grads) {
                             LayerWeights thread_grads;
                             if (grads != g_span) thread_grads = layer_views(l, grads, G.ln1.device());
                             layer_backward(ctx, W, P, grads == g_span ? G : thread_grads,
                                            acts.layers[static_cast<size_t>(l)], acts.scratch.dx,
                                            acts.chunks[static_cast<size_t>(c)], acts.positions, rope,
                                            acts.chunk_scratch[static_cast<size_t>(t)]);
                           });
    if (ready) ready(o.begin, o.end);
  }
}

}  // namespace rlcpp
