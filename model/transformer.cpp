#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/temperature.h"
#include "model/layer_ops.h"
#include "model/transformer_weights.h"

namespace rlcpp {

namespace {

using namespace layer_ops;

// The bytes of weights one pass of all layers and the head reads: the panels, or the fp32 parameters.
int64_t decode_weight_bytes(const PackedWeights* panels, const ParameterStore& params) {
  if (panels == nullptr) return static_cast<int64_t>(params.flat().nbytes());
  int64_t bytes = static_cast<int64_t>(panels->lm_head.panels.nbytes());
  for (const PackedWeights::Layer& l : panels->layers)
    for (const ops::PackedWeight* w : {&l.qkv, &l.o, &l.gate_up, &l.down})
      bytes += static_cast<int64_t>(w->panels.nbytes());
  return bytes;
}

}  // namespace

Transformer::Transformer(const ModelConfig& config, const ModelNumerics& numerics)
    : config_(config), numerics_(numerics) {
  config_.validate("model config");
  numerics_.validate("model numerics");
  auto layout = parameter_layout(config_);
  auto offset = [&](const std::string& name) -> int64_t {
    for (const auto& info : layout)
      if (info.name == name) return info.offset;
    return -1;
  };
  embed_offset_ = offset("model.embed_tokens.weight");
  final_norm_offset_ = offset("model.norm.weight");
  lm_head_offset_ = config_.tie_word_embeddings ? embed_offset_ : offset("lm_head.weight");
  if (config_.value_head) {
    lm_head_offset_ = -1;
    score_w_offset_ = offset("score.weight");
    score_b_offset_ = offset("score.bias");
  }
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    LayerOffsets o{offset(p + "input_layernorm.weight"), offset(p + "self_attn.q_proj.weight"),
                   offset(p + "self_attn.q_proj.bias"), offset(p + "self_attn.o_proj.weight"),
                   offset(p + "self_attn.o_proj.bias"), offset(p + "post_attention_layernorm.weight"),
                   offset(p + "mlp.gate_proj.weight"), offset(p + "mlp.down_proj.weight"),
                   offset(p + "self_attn.q_norm.weight"), offset(p + "self_attn.k_norm.weight"), -1, -1};
    for (const auto& info : layout)
      if (info.name.rfind(p, 0) == 0) {
        o.begin = o.begin < 0 ? info.offset : std::min(o.begin, info.offset);
        o.end = std::max(o.end, info.offset + info.numel());
      }
    layer_offsets_.push_back(o);
  }
  // A host constant of the model; an executor places it on its device (Executor::resident).
  rope_ = ops::rope_table(ExecContext::cpu(), config_.max_position_embeddings, config_.head_dim(),
                          static_cast<float>(config_.rope_theta));
}

Transformer::Weights Transformer::views(const ParameterStore& params) const {
  RLCPP_CHECK(params.numel() == parameter_layout(config_).back().offset + parameter_layout(config_).back().numel(),
              "Transformer: parameter buffer of " << params.numel() << " floats does not match the model config");
  RLCPP_CHECK(params.dtype() == DType::kF32 || (params.dtype() == DType::kBF16 && params.flat().on_host()),
              "Transformer: parameters held in " << dtype_name(params.dtype()) << " on "
                                                 << device_name(params.flat().device())
                                                 << " (fp32, or bf16 on the host: a frozen base)");
  const int64_t C = config_.hidden_size, V = config_.vocab_size;
  Weights w;
  w.embed = params.view(embed_offset_, {V, C});
  w.final_norm = params.view(final_norm_offset_, {C});
  if (config_.value_head) {
    w.score_w = params.view(score_w_offset_, {1, C});
    w.score_b = params.view(score_b_offset_, {1});
  } else {
    w.lm_head = params.view(lm_head_offset_, {V, C});
  }
  const DType dtype = params.dtype();
  char* flat = static_cast<char*>(const_cast<void*>(params.flat().raw()));
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l)
    w.layers.push_back(layer_views(l, flat + layer_offsets_[static_cast<size_t>(l)].begin * dtype_size(dtype),
                                   params.flat().device(), dtype));
  if (dtype != DType::kF32) widen_vectors(w);
  return w;
}

void Transformer::widen_vectors(Weights& w) {
  // The norms' weights, the biases and a score head: small, and read by kernels of fp32 operands. The matrices
  // stay as they are held: the packing reads them (ops::pack_weight of a bf16 source), and the embedding lookup.
  const ExecContext host = ExecContext::cpu();
  auto widen = [&](Tensor& t) {
    if (!t.defined()) return;
    Tensor wide = Tensor::empty(t.shape());
    ops::convert(host, t, wide);
    t = wide;
  };
  widen(w.final_norm);
  widen(w.score_w);
  widen(w.score_b);
  for (LayerWeights& L : w.layers)
    for (Tensor* t : {&L.ln1, &L.ln2, &L.qkv_b, &L.o_b, &L.q_norm, &L.k_norm}) widen(*t);
}

Transformer::LayerWeights Transformer::layer_views(int64_t l, void* span, Device device, DType dtype) const {
  const LayerOffsets& o = layer_offsets_[static_cast<size_t>(l)];
  const int64_t C = config_.hidden_size, F = config_.intermediate_size;
  const int64_t qkv = config_.q_dim() + 2 * config_.kv_dim();
  auto view = [&](int64_t offset, Shape shape) {
    return Tensor::borrow(static_cast<char*>(span) + (offset - o.begin) * dtype_size(dtype), std::move(shape), dtype,
                          device);
  };
  LayerWeights L;
  L.ln1 = view(o.ln1, {C});
  L.qkv_w = view(o.qkv_w, {qkv, C});
  if (o.qkv_b >= 0) L.qkv_b = view(o.qkv_b, {qkv});
  L.o_w = view(o.o_w, {C, config_.q_dim()});
  if (o.o_b >= 0) L.o_b = view(o.o_b, {C});
  L.ln2 = view(o.ln2, {C});
  L.gate_up = view(o.gate_up, {2 * F, C});
  L.down = view(o.down, {C, F});
  if (o.q_norm >= 0) L.q_norm = view(o.q_norm, {config_.head_dim()});
  if (o.k_norm >= 0) L.k_norm = view(o.k_norm, {config_.head_dim()});
  return L;
}

void Transformer::forward(const ExecContext& ctx, const ParameterStore& params, const PackedBatch& batch,
                          const ForwardOptions& options, Activations& acts) const {
  batch.validate(config_.vocab_size, config_.max_position_embeddings);
  check_temperature(options.temperature, "forward", /*zero_is_greedy=*/false);
  RLCPP_CHECK(!(config_.value_head && options.entropy), "forward: a value-head model has no token distribution "
                                                        "(entropy requested)");
  const Weights w = views(params);
  const int64_t N = batch.num_tokens(), C = config_.hidden_size, V = config_.vocab_size;

  acts.num_tokens = N;
  acts.temperature = options.temperature;
  acts.has_entropy = options.entropy;
  acts.truncation = options.truncation;
  RLCPP_CHECK(!(options.entropy && options.truncation.active(config_.vocab_size)),
              "forward: the entropy of a top-k / top-p truncated distribution is not computed (logprob_space "
              "sampled with an entropy term)");
  acts.tokens = i32_on(ctx, batch.tokens);
  acts.targets = i32_on(ctx, batch.targets);
  acts.positions = i32_on(ctx, batch.positions);
  acts.cu_seqlens = i32_on(ctx, batch.cu_seqlens);
  acts.layers.resize(config_.num_hidden_layers);

  // The executor of ctx's device runs the layers (model/executor.h): on the CPU chunk by chunk on the threads,
  // every product through the packed kernel, as in forward_cached, so both compute the same bits; on a device
  // over all rows at once, through the packed kernel (the CPU's chains) in batch-invariant numerics, so that
  // the engine's decode on that device computes the same bits, else through cuBLAS.
  const Executor& ex = executor_of(ctx);
  const bool pack = ex.packs_forward(numerics_);
  if (pack) acts.packed.layers.resize(1);  // one layer's panels at a time (forward_layers)
  acts.chunks = ex.plan_chunks(ctx, batch.cu_seqlens, N);

  // The residual stream lives in the kept activations: layer l writes layer l+1's x (or x_final) in place, so
  // repeated forwards of one shape allocate (and page-fault) nothing for it.
  // In bf16/fp16 layer 0's x is stored in that dtype: the embedding rows are gathered in F32 into x_final (written
  // again by the last layer) and stored (rounded) from there. A forward that keeps nothing runs the whole
  // residual stream in x_final.
  const DType dt = numerics_.compute;
  const DType kept = storage_dtype(dt);  // tf32 keeps fp32
  const bool keep = options.keep_activations;
  acts.kept = keep;
  RLCPP_CHECK(options.adapters == nullptr || ctx.is_host(),
              "forward: unmerged adapters run on the host, not on " << ctx.name());
  acts.adapters = options.adapters;
  if (keep) ensure(ctx, acts.layers[0].x, {N, C}, kept);
  if (keep && kept == DType::kF32) {
    ops::embedding_forward(ctx, w.embed, acts.tokens, acts.layers[0].x);
  } else {
    ensure(ctx, acts.x_final, {N, C});
    ops::embedding_forward(ctx, w.embed, acts.tokens, acts.x_final);
    if (keep)
      ops::convert(ctx, acts.x_final, acts.layers[0].x);  // rounded to the dtype as stored
    else if (kept != DType::kF32)
      ops::round_to(ctx, acts.x_final, dt);  // as the kept x and the cached decode's embedding are
  }
  forward_layers(ctx, w, pack ? &acts.packed.layers[0] : nullptr, acts, keep);
  ensure(ctx, acts.rstd_final, {N});
  ensure(ctx, acts.xn_final, {N, C});
  ops::rmsnorm_forward(ctx, acts.x_final, w.final_norm, static_cast<float>(config_.rms_norm_eps), acts.xn_final,
                       acts.rstd_final, dt);
  if (config_.value_head) {
    ensure(ctx, acts.values, {N});
    Tensor values = acts.values.reshape({N, 1});
    ops::matmul(ctx, acts.xn_final, false, w.score_w, true, values);
    ops::add_bias(ctx, values, w.score_b);
    return;
  }
  ensure(ctx, acts.logits, {N, V});
  ensure(ctx, acts.lse, {N});
  ensure(ctx, acts.logp, {N});
  if (pack) run_pack_jobs(ctx, {{&w.lm_head, &acts.packed.lm_head, numerics_.compute_format()}}, /*transposed=*/false);
  linear(ctx, acts.xn_final, w.lm_head, pack ? &acts.packed.lm_head : nullptr, acts.logits, dt);
  // lm_head's panels (V x C: 272 MB for a 0.5B model in bf16) go back to the pool now, not with the activations
  // after the backward, where the backward's own transposed copy of them is the largest buffer.
  acts.packed.lm_head = ops::PackedWeight();
  if (options.truncation.active(V)) {
    ops::logprob_truncated_forward(ctx, acts.logits, acts.targets, options.temperature, options.truncation, acts.logp,
                                   acts.lse);
    return;
  }
  Tensor* entropy = nullptr;
  if (options.entropy) {
    ensure(ctx, acts.entropy, {N});
    entropy = &acts.entropy;
  }
  ops::logprob_forward(ctx, acts.logits, acts.targets, options.temperature, acts.logp, acts.lse, entropy);
}

void Transformer::backward(const ExecContext& ctx, const ParameterStore& params, Activations& acts, const float* dlogp,
                           const float* dentropy, ParameterStore& grads, const GradsReadyFn& ready) const {
  RLCPP_CHECK(grads.numel() == params.numel(), "backward: gradient buffer has " << grads.numel()
                                                                                << " floats, parameters "
                                                                                << params.numel());
  RLCPP_CHECK(acts.adapters == nullptr, "backward: a forward with unmerged adapters is differentiated by "
                                         "backward_frozen (the adapters' gradients), not backward");
  RLCPP_CHECK(params.dtype() == DType::kF32, "backward: parameters held in " << dtype_name(params.dtype())
                                                 << " are a frozen base (backward_frozen trains adapters beside it)");
  const Weights w = views(params);
  Weights g = views(grads);
  const bool pack = head_backward(ctx, w, acts, dlogp, dentropy, &g.lm_head);
  backward_body(ctx, w, pack, g, acts, ready);
}

void Transformer::backward_frozen(const ExecContext& ctx, const ParameterStore& params, Activations& acts,
                                  const float* dlogp, const float* dentropy, FrozenGradients& grads) const {
  RLCPP_CHECK(ctx.is_host(), "backward_frozen: adapters train on the host, not on " << ctx.name());
  const Weights w = views(params);
  Weights g;
  const bool pack = head_backward(ctx, w, acts, dlogp, dentropy, nullptr);
  backward_body(ctx, w, pack, g, acts, {}, &grads);
}

bool Transformer::head_backward(const ExecContext& ctx, const Weights& w, Activations& acts, const float* dlogp,
                                const float* dentropy, Tensor* dlm_head) const {
  RLCPP_CHECK(dentropy == nullptr || acts.has_entropy, "backward: dentropy given but forward computed no entropy");
  RLCPP_CHECK(acts.kept, "backward: the forward kept no activations (ForwardOptions::keep_activations was false)");
  RLCPP_CHECK(!config_.value_head, "backward: a value-head model takes dL/dvalue (backward_values), not dL/dlogp");
  RLCPP_CHECK(acts.logits.defined(), "backward: these activations were differentiated already (a backward consumes "
                                     "the forward's logits): one backward per forward");
  const int64_t N = acts.num_tokens, C = config_.hidden_size, V = config_.vocab_size;

  const Executor& ex = executor_of(ctx);
  const Tensor dlogp_t = ex.host_floats(ctx, dlogp, {N});
  Tensor dentropy_t;
  if (dentropy) dentropy_t = ex.host_floats(ctx, dentropy, {N});
  auto& S = acts.scratch;
  ensure(ctx, S.dlogits, {N, V});
  if (acts.truncation.active(V))
    ops::logprob_truncated_backward(ctx, dlogp_t, acts.logits, acts.targets, acts.temperature, acts.truncation,
                                    acts.lse, S.dlogits);
  else
    ops::logprob_backward(ctx, dlogp_t, dentropy ? &dentropy_t : nullptr, acts.logits, acts.targets, acts.temperature,
                          acts.lse, S.dlogits);

  // The vocabulary-wide buffers are released as soon as they are used (the logits here, the logits' gradient
  // and lm_head's transposed panels below): beside the layers' activations they are the backward's peak.
  acts.logits = Tensor();
  // The input gradients' weights, packed transposed (the CPU's executor). lm_head's weight gradient: in fp32
  // math one sgemm over the whole vocabulary (OpenBLAS, or cuBLAS in the model's math); a bf16 model's on the CPU
  // block by block beside the input gradient, through the bf16 weight-gradient kernel.
  const bool pack = ex.packs_backward();
  const DType math = ex.backward_math(numerics_.compute);
  const bool head_grad_in_blocks = pack && math != DType::kF32;
  ensure(ctx, S.dxn_final, {N, C});
  if (dlm_head && !head_grad_in_blocks)
    ops::matmul(ctx, S.dlogits, true, acts.xn_final, false, *dlm_head, 1.0f, 1.0f, model_math(ctx, numerics_.compute));
  if (pack)
    lm_head_grads_in_blocks(ctx, S.dlogits, w.lm_head, acts.xn_final, head_grad_in_blocks ? dlm_head : nullptr, math,
                            S.wt.lm_head, S.dxn_final);
  else
    linear_input_grad(ctx, S.dlogits, w.lm_head, nullptr, S.dxn_final, numerics_.compute);
  S.wt.lm_head = ops::PackedWeight();
  S.dlogits = Tensor();
  return pack;
}

void Transformer::lm_head_grads_in_blocks(const ExecContext& ctx, const Tensor& dlogits, const Tensor& lm_head,
                                          const Tensor& xn, Tensor* dlm_head, DType math, ops::PackedWeight& block_t,
                                          Tensor& dx) const {
  // dx (N,C) = dlogits (N,V) · lm_head (V,C), a block of kLmHeadGradRows vocabulary rows at a time: each block's
  // rows of lm_head packed transposed and its columns of dlogits, their product added to dx in block order (a
  // fixed order: each row's result is the same bits in any batch). The panels of a block are 59 MB for a 0.5B
  // model's 896 columns; the whole matrix's would be 545 MB beside the layers' activations, the backward's peak.
  const int64_t N = dlogits.size(0), V = dlogits.size(1);
  const int64_t rows = std::min(V, kLmHeadGradRows);
  Tensor dy = ctx.empty({N, rows});
  for (int64_t v0 = 0; v0 < V; v0 += rows) {
    const int64_t n = std::min(rows, V - v0);
    if (n != dy.size(1)) dy = ctx.empty({N, n});
    const float* from = dlogits.data<float>() + v0;
    float* to = dy.data<float>();
    for (int64_t r = 0; r < N; ++r) std::copy_n(from + r * V, n, to + r * n);
    const Tensor w_rows = lm_head.slice_rows(v0, v0 + n);
    run_pack_jobs(ctx, {{&w_rows, &block_t, math}}, /*transposed=*/true);
    ops::matmul_packed(ctx, dy, block_t, dx, /*accumulate=*/v0 > 0);
    if (dlm_head) {
      Tensor dw_rows = dlm_head->slice_rows(v0, v0 + n);
      ops::linear_weight_grad(ctx, dy, xn, dw_rows, math);
    }
  }
}

void Transformer::backward_values(const ExecContext& ctx, const ParameterStore& params, Activations& acts,
                                  const float* dvalue, ParameterStore& grads, const GradsReadyFn& ready) const {
  RLCPP_CHECK(config_.value_head, "backward_values: the model has no value head (use backward with dL/dlogp)");
  RLCPP_CHECK(acts.kept,
              "backward_values: the forward kept no activations (ForwardOptions::keep_activations was false)");
  RLCPP_CHECK(grads.numel() == params.numel(), "backward_values: gradient buffer has " << grads.numel()
                                                                                       << " floats, parameters "
                                                                                       << params.numel());
  RLCPP_CHECK(params.dtype() == DType::kF32, "backward_values: a critic's parameters are fp32, not "
                                                 << dtype_name(params.dtype()));
  const Weights w = views(params);
  Weights g = views(grads);
  const int64_t N = acts.num_tokens, C = config_.hidden_size;
  // values (N,1) = xn (N,C) score_w^T + b: dscore_w (1,C) += dv^T xn, db += sum dv, dxn = dv score_w.
  const Executor& ex = executor_of(ctx);
  const Tensor dv = ex.host_floats(ctx, dvalue, {N, 1});
  ops::matmul(ctx, dv, true, acts.xn_final, false, g.score_w, 1.0f, 1.0f);
  ops::bias_backward(ctx, dv, g.score_b);
  auto& S = acts.scratch;
  ensure(ctx, S.dxn_final, {N, C});
  ops::matmul(ctx, dv, false, w.score_w, false, S.dxn_final);
  backward_body(ctx, w, ex.packs_backward(), g, acts, ready);
}

std::vector<std::pair<int64_t, int64_t>> Transformer::layer_param_spans() const {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const LayerOffsets& o : layer_offsets_) spans.emplace_back(o.begin, o.end);
  return spans;
}

void Transformer::backward_body(const ExecContext& ctx, const Weights& w, bool packed, Weights& g, Activations& acts,
                                const GradsReadyFn& ready, FrozenGradients* frozen) const {
  const int64_t N = acts.num_tokens, C = config_.hidden_size;
  auto& S = acts.scratch;
  S.dx = ctx.zeros({N, C});  // gradient of the residual stream, accumulated in place from 0 (from ctx's pool)
  if (frozen) S.dnorm = ctx.zeros({C});  // the final norm's weight gradient, not wanted
  ops::rmsnorm_backward(ctx, S.dxn_final, acts.x_final, w.final_norm, acts.rstd_final, S.dx,
                        frozen ? S.dnorm : g.final_norm);
  if (packed) S.wt.layers.resize(1);  // one layer's transposed panels at a time (backward_layers)
  backward_layers(ctx, w, packed ? &S.wt.layers[0] : nullptr, g, acts, ready, frozen);
  if (!frozen) ops::embedding_backward(ctx, S.dx, acts.tokens, g.embed);
}

Tensor Transformer::forward_cached(const ExecContext& ctx, const ParameterStore& params, const CachedStep& step,
                                   KVCache& cache, const PackedWeights* packed,
                                   const LinearAdapters* adapters) const {
  RLCPP_CHECK(!config_.value_head, "forward_cached: a value-head model (critic) has no logits to decode from");
  RLCPP_CHECK(adapters == nullptr || ctx.is_host(),
              "forward_cached: unmerged adapters run on the host, not on " << ctx.name());
  const Executor& ex = executor_of(ctx);
  // The parameters the decode reads (embeddings, norms; the products without panels): the prepared copy, the
  // panels' own copies (self-contained), or the parameters themselves. They must be on ctx's device. Weights
  // prepared self-contained decode without the parameters (`params` may then be an empty store).
  const bool own_copies = packed && packed->embed.defined();
  const ParameterStore& read = packed && packed->blas.flat().defined() ? packed->blas : params;
  RLCPP_CHECK(own_copies || ctx.holds(read.flat()),
              "forward_cached: on " << ctx.name() << " the decode runs on weights prepared on that device "
                                    << "(prepare_decode_weights with the same context)");
  RLCPP_CHECK(packed == nullptr ||
                  ((packed->source == params.flat().raw() ||
                    (packed->self_contained() && !params.flat().defined())) &&
                   !packed->transposed &&
                   (packed->for_blas || static_cast<int64_t>(packed->layers.size()) == config_.num_hidden_layers)),
              "forward_cached: the packed decode weights were not packed from this parameter buffer");
  RLCPP_CHECK(packed != nullptr || (numerics_.compute == DType::kF32 && !is_quantized(numerics_.linear_weights)),
              "forward_cached: " << numerics_.describe()
                                 << " numerics decode from prepared weights (prepare_decode_weights)");
  // The OpenBLAS decode (and a device's) multiplies by the prepared copy, or by the fp32 parameters; a device's
  // embeddings and norms come from its copy too.
  const bool blas = packed == nullptr || packed->for_blas;
  const Weights w = own_copies ? prepared_views(*packed) : views(read);
  const PackedWeights* panels = blas ? nullptr : packed;
  auto packed_layer = [panels](int64_t l) { return panels ? &panels->layers[static_cast<size_t>(l)] : nullptr; };
  const int64_t N = static_cast<int64_t>(step.tokens.size()), C = config_.hidden_size, V = config_.vocab_size;
  const int64_t Hq = config_.num_attention_heads, Hkv = config_.num_key_value_heads, D = config_.head_dim();
  const int64_t F = config_.intermediate_size, qkv_dim = config_.q_dim() + 2 * config_.kv_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const DType dt = numerics_.compute;
  RLCPP_CHECK(step.positions.size() == step.tokens.size() && step.query_seq.size() == step.tokens.size() &&
                  step.slot_mapping.size() == step.tokens.size(),
              "forward_cached: tokens, positions, query_seq and slot_mapping must have one entry per row");
  RLCPP_CHECK(static_cast<int64_t>(cache.k.size()) == config_.num_hidden_layers,
              "forward_cached: the cache has " << cache.k.size() << " layers, the model "
                                               << config_.num_hidden_layers);
  for (int64_t i = 0; i < N; ++i)
    RLCPP_CHECK(step.positions[i] >= 0 && step.positions[i] < config_.max_position_embeddings,
                "forward_cached: row " << i << " has position " << step.positions[i] << " outside the context of "
                                       << config_.max_position_embeddings);

  Tensor rope_copy;
  const Tensor& rope = packed && packed->rope.defined() ? packed->rope : ex.resident(ctx, rope_, rope_copy);
  Tensor tokens = i32_on(ctx, step.tokens), positions = i32_on(ctx, step.positions);
  Tensor query_seq = i32_on(ctx, step.query_seq), slots = i32_on(ctx, step.slot_mapping);
  Tensor indptr = i32_on(ctx, step.block_indptr), indices = i32_on(ctx, step.block_indices);

  Tensor x = ctx.empty({N, C}), xn = ctx.empty({N, C}), rstd = ctx.empty({N});
  Tensor qkv = ctx.empty({N, qkv_dim});
  Tensor q = ctx.empty({N, Hq, D}), k = ctx.empty({N, Hkv, D}), v = ctx.empty({N, Hkv, D});
  Tensor att = ctx.empty({N, Hq * D});
  Tensor gate_up = ctx.empty({N, 2 * F}), act = ctx.empty({N, F});
  Tensor q_pre, k_pre, q_rstd, k_rstd;  // Qwen3's q_norm and k_norm
  if (config_.has_qk_norm()) {
    q_pre = ctx.empty({N, Hq, D});
    k_pre = ctx.empty({N, Hkv, D});
    q_rstd = ctx.empty({N, Hq});
    k_rstd = ctx.empty({N, Hkv});
  }
  // Rows [r0, r1) through every layer, in row views of the step's buffers, the residual stream x updated in
  // place. Every op works row by row, so a range gets exactly the values the whole step would give its rows.
  auto run_rows = [&](int64_t r0, int64_t r1) {
    auto rows_of = [&](const Tensor& t) { return t.slice_rows(r0, r1); };
    const Tensor tok = rows_of(tokens), seq = rows_of(query_seq), slot = rows_of(slots);
    LayerRows r;
    r.x = rows_of(x);
    r.h = r.x;
    r.out = r.x;
    r.positions = rows_of(positions);
    r.rope = rope;
    r.q = rows_of(q);
    r.k = rows_of(k);
    r.v = rows_of(v);
    if (config_.has_qk_norm()) {
      r.q_pre = rows_of(q_pre);
      r.k_pre = rows_of(k_pre);
      r.q_rstd = rows_of(q_rstd);
      r.k_rstd = rows_of(k_rstd);
    }
    r.att = rows_of(att);
    r.gate_up = rows_of(gate_up);
    r.xn = rows_of(xn);
    r.rstd = rows_of(rstd);
    r.qkv = rows_of(qkv);
    r.act = rows_of(act);
    r.adapters = adapters;
    r.row0 = r0;
    ops::embedding_forward(ctx, w.embed, tok, r.x);
    ops::round_to(ctx, r.x, dt);
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
      r.layer = l;
      layer_body(ctx, w.layers[static_cast<size_t>(l)], packed_layer(l), r,
                 [&](const Tensor& q_r, const Tensor& k_r, const Tensor& v_r, Tensor& att_r) {
                   ops::paged_kv_write(ctx, k_r, v_r, slot, cache.k[l], cache.v[l]);
                   ops::paged_attention(ctx, q_r, cache.k[l], cache.v[l], seq, r.positions, indptr, indices,
                                        cache.block_size, scale, att_r);
                 });
    }
  };
  // The executor runs the rows: one range, or (CPU) one range per thread side by side when that gains.
  ex.run_cached_step(step, N * config_.num_parameters(), decode_weight_bytes(panels, read), run_rows);
  const int64_t R = static_cast<int64_t>(step.logits_rows.size());
  for (int32_t row : step.logits_rows)
    RLCPP_CHECK(row >= 0 && row < N, "forward_cached: logits row " << row << " outside the step's " << N << " rows");
  // The requested rows of the residual stream: a gather of rows, the embedding lookup's (x as the table).
  Tensor last = ctx.empty({R, C});
  ops::embedding_forward(ctx, x, i32_on(ctx, step.logits_rows), last);
  Tensor last_n = ctx.empty({R, C}), last_rstd = ctx.empty({R});
  ops::rmsnorm_forward(ctx, last, w.final_norm, eps, last_n, last_rstd, dt);
  Tensor logits = ctx.empty({R, V});
  linear(ctx, last_n, w.lm_head, panels ? &panels->lm_head : nullptr, logits, dt);
  return logits;
}

}  // namespace rlcpp
