// The Llama-family transformer (Llama, Qwen2, Qwen3) and the one model API every algorithm uses (docs/architecture.md):
//   forward(batch)   -> per-token log p(target | prefix) at a temperature (and entropy), activations kept;
//   backward(dlogp)  -> parameter gradients, accumulated into a ParameterStore of the same layout.
// forward_cached runs prefill and decode over a paged KV cache for the rollout side. Both paths run the one layer
// body (layer_body) with the same kernels (kernels/ops.h), in the model's numerics (model/numerics.h): a
// trainer and an engine built with the same ModelNumerics compute the same bits.
//
// A critic (config.value_head, Hugging Face *ForTokenClassification with num_labels 1) has the same body and
// a scalar head instead of lm_head: forward fills acts.values (N) = norm(x_final) . score.weight + score.bias
// and backward_values takes dL/dvalue. Convention (verl's, values = logits[:, -R-1:-1]): values[i] is computed
// from the hidden state at position i, which has seen tokens[0..i] and predicts targets[i]; it estimates the
// return of the rest of the sequence from the action targets[i] on. So values[i] lines up with logp[i]: one
// array layout (and mask, targets >= 0) serves the actor and the critic.
#pragma once

#include <functional>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/executor.h"
#include "model/kv_cache.h"
#include "model/numerics.h"
#include "model/packed_batch.h"
#include "model/parameters.h"
#include "model/row_chunks.h"

namespace rlcpp {

class LinearAdapters;

struct ForwardOptions {
  float temperature = 1.0f;  // finite and >= kMinTemperature (kernels/temperature.h)
  bool entropy = false;  // also compute the entropy of each position's tempered distribution
  // logprob_space "sampled": score each target under the top-k / top-p truncated distribution its rollout drew
  // it from (kernels/truncation.h; the sampler's rule replayed on these logits). Off by default; no entropy then.
  Truncation truncation;
  // Keep what backward needs (LayerActivations). A pass that no backward follows (old and reference log-probs,
  // a critic's values, scoring) sets it false: each chunk of rows then runs through its thread's F32 rows and the
  // residual stream is updated in place, so nothing of the size of the batch is written per layer and a
  // bf16/fp16 model converts nothing. The same bits either way (row by row, the same ops).
  bool keep_activations = true;
  // Adapters run unmerged beside `params` (LinearAdapters; host contexts). A backward of this forward is
  // backward_frozen with the same adapters.
  const LinearAdapters* adapters = nullptr;
};

// A copy of the matmul weights packed for ops::matmul_packed, the CPU model's Linear product: as they are
// (y = x W^T: forward, forward_cached) or transposed (dx = dy W: backward). Packing once per policy version
// spares the repacking OpenBLAS does on every call, and computing every Linear output as one fma chain in k
// order makes each row's result the same bits whatever the batch: the training forward and the rollout's
// cached decode return identical log-probs. A snapshot: pack again (Transformer::pack_weights) whenever the
// weights change.
//
// They are the weights "prepared per policy version" in the model's numerics: panels in the compute dtype (or
// the Linear layers quantised), biases rounded to it. A decode that is not batch-invariant multiplies through
// OpenBLAS instead: `blas` then holds the parameters as the numerics compute with them (rounded, dequantised;
// empty for fp32, whose own parameters serve) and there are no panels. On a CUDA context (the CUDA executor)
// `blas` is that copy on the device, always defined, multiplied through cuBLAS, and `rope` the RoPE table there.
//
// Prepared `self_contained` (prepare_decode_weights), they also hold what else the decode reads, so that an engine
// keeps no reference to the parameters (Engine::take_weights): the embedding table in the compute dtype's
// storage (BF16/F16 rows widened exactly; the decode rounds its embedding rows to that dtype anyway), the norms'
// weights and the biases (F32 copies, small).
struct PackedWeights {
  struct Layer {
    ops::PackedWeight qkv, o, gate_up, down;
    Tensor qkv_b, o_b;  // the biases rounded to the compute dtype (undefined in fp32: the parameters' serve)
    Tensor ln1, ln2, q_norm, k_norm;  // self-contained: copies of the norms' weights (q_norm, k_norm: Qwen3)
  };
  std::vector<Layer> layers;
  ops::PackedWeight lm_head;
  Tensor embed, final_norm;       // self-contained: the embedding table (compute storage dtype), the final norm
  // Whether the decode reads nothing of the parameters: the panels with their own copies above, or a full
  // prepared copy (`blas`).
  bool self_contained() const { return embed.defined() || blas.flat().defined(); }
  ParameterStore blas;            // the not-batch-invariant decode's weights (see above)
  bool for_blas = false;          // prepared for the OpenBLAS (or cuBLAS) decode: no panels
  Tensor rope;                    // a device context's RoPE table (the host's is the model's own)
  const void* source = nullptr;   // the parameter buffer they were packed from
  bool transposed = false;
};

// What forward keeps for backward, sized for the batch's N tokens. Reused across calls when shapes allow.
// The norms' outputs and the SwiGLU output are not kept: the backward recomputes them per chunk of rows from x,
// h and gate_up (a few operations per element, in cache) instead of reading them back from memory.
// x, q, k, v, q_pre, k_pre, att, h and gate_up are tensors of the compute dtype (ModelNumerics::compute): in
// bf16/fp16 they hold the values the model rounded there, in half the bytes; the kernels compute on F32 rows of
// them (ChunkScratch::rows_f32), widened and stored with ops::convert, exactly. lse, q_rstd and k_rstd are F32.
struct LayerActivations {
  Tensor x;        // (N,C) block input (residual stream)
  Tensor q, k, v;  // (N,Hq,D), (N,Hkv,D), (N,Hkv,D), after RoPE
  // Qwen3 (q_norm, k_norm): q and k as projected, before their norms, and the norms' rstd (N,Hq), (N,Hkv).
  // Kept rather than recomputed in the backward: recomputing them would take the qkv product again.
  Tensor q_pre, k_pre, q_rstd, k_rstd;
  Tensor att;      // (N,Hq*D) attention output before o_proj
  Tensor lse;      // (N,Hq)
  Tensor h;        // (N,C) after the attention residual
  Tensor gate_up;  // (N,2F)
};

// One thread's buffers for a chunk of rows passing through one layer: the outputs that live only that long,
// sized for the largest chunk, and (CPU backward) the layer's parameter gradients from this thread's chunks.
struct ChunkScratch {
  Tensor xn, rstd, qkv, act;                           // forward, and recomputed in the backward
  Tensor dxn, dact, dgate_up, datt, dq, dk, dv, dqkv;  // backward
  Tensor dq_pre, dk_pre;                               // backward through q_norm, k_norm (Qwen3)
  Tensor layer_grads;
  Tensor frozen_dump;  // backward_frozen: where the frozen norms' and biases' gradients go, never read
  // A chunk's F32 rows of the layer's activations (rows [0, chunk rows)). A bf16/fp16 model computes on these
  // (x, q, k, v, q_pre, k_pre, att, h, gate_up): the forward stores them into the kept tensors and the backward
  // widens the kept rows into them. A forward that keeps nothing computes on them in every dtype (lse, q_rstd
  // and k_rstd too). Undefined when an fp32 forward keeps its activations: its kernels read and write the kept
  // tensors themselves.
  LayerActivations rows_f32;
};

// The Linear layers of a decoder layer, fused as the model multiplies them (q/k/v and gate/up in one product each).
enum class LayerLinear { kQkv, kO, kGateUp, kDown };

// Adapters that a model's Linear layers run unmerged (model/lora.h: LoraAdapters), beside the base weights: after
// a product y = x·Wᵀ (rounded to the compute dtype, its bias added), y += s·(x·Aᵀ)·Bᵀ for each adapted matrix of
// it, then rounded again. A row's result depends on that row alone (fixed fma chains), so it is the same
// whatever the batch: a trainer's forward and an engine's decode given the same adapters agree bit for bit.
class LinearAdapters {
 public:
  virtual ~LinearAdapters() = default;
  virtual bool adapts(int64_t layer, LayerLinear linear) const = 0;
  // y (n, the product's width) += the adapters' outputs from x (n, its input width), F32 rows on the host; the
  // rows are rows [row0, row0 + n) of the pass (a dropout's masks are drawn by row).
  virtual void add(int64_t layer, LayerLinear linear, const Tensor& x, Tensor& y, int64_t row0) const = 0;
  // The backward's share: dx (n, input width) += s·((dy·B)·A) from dy (n, the product's width).
  virtual void add_input_grad(int64_t layer, LayerLinear linear, const Tensor& dy, Tensor& dx,
                              int64_t row0) const = 0;
};

// One layer pass over n rows (a training chunk, or rows of a cached step): views of the tensors it reads and
// writes, all with n rows. The cached decode updates its residual stream in place (h and out are x).
struct LayerRows {
  Tensor x;          // (n,C) layer input
  Tensor h;          // (n,C) after the attention block's residual connection (may be x)
  Tensor out;        // (n,C) layer output (may be x or h)
  Tensor positions;  // (n) int32
  Tensor rope;       // the RoPE table on the rows' device (Executor::resident)
  Tensor q, k, v;    // (n,Hq,D), (n,Hkv,D), (n,Hkv,D) after RoPE
  Tensor q_pre, k_pre, q_rstd, k_rstd;  // Qwen3: q, k before q_norm, k_norm; their rstd (n,Hq), (n,Hkv)
  Tensor att;        // (n,Hq*D)
  Tensor gate_up;    // (n,2F)
  Tensor xn, rstd, qkv, act;  // scratch: (n,C), (n), (n,(Hq+2Hkv)D), (n,F)
  Tensor product;    // scratch (n,C): a rounded product before its residual add (OpenBLAS, or adapted)
  const LinearAdapters* adapters = nullptr;  // unmerged adapters of the model's Linear layers, if any
  int64_t layer = 0;                          // the layer these rows pass through (the adapters' index)
  int64_t row0 = 0;                           // the first of these rows in the pass (the adapters' dropout)
};
// The attention of a layer pass: q, k, v (after RoPE, rounded) -> att (n,Hq,D). The training forward attends
// within each sequence of its chunk (keeping lse); the cached decode writes k and v to the cache and attends to
// it.
using LayerAttention = std::function<void(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& att)>;

struct Activations {
  int64_t num_tokens = 0;
  std::vector<LayerActivations> layers;
  Tensor x_final;   // (N,C) last block output
  Tensor rstd_final;
  Tensor xn_final;  // (N,C)
  Tensor logits;    // (N,V)
  Tensor lse;       // (N)
  Tensor logp;      // (N), 0 where target is -1
  Tensor entropy;   // (N) when requested
  Tensor values;    // (N) value-head models only (they have no logits, lse, logp)
  Tensor tokens, targets, positions, cu_seqlens;  // int32 copies of the batch, on the context's device
  Tensor rope;  // the RoPE table on a device context's device (the host's table is the model's own)
  // The row chunks the layers run in: CPU layers run chunk by chunk, the chunks split between the threads
  // (one chunk of all rows otherwise).
  std::vector<RowChunk> chunks;
  std::vector<ChunkScratch> chunk_scratch;  // one per thread
  PackedWeights packed;  // the weights forward packed (CPU parameters), kept to spare reallocating them
  // The backward's scratch: the weights packed transposed, and the gradients of the head and of the residual
  // stream. The vocabulary-wide ones (lm_head's panels, the logits' gradient) go back to the context's pool as soon
  // as they are used, the rest is kept across calls (a repeated backward of one shape allocates nothing new).
  struct BackwardScratch {
    PackedWeights wt;
    Tensor dlogits, dxn_final, dx;
    Tensor dnorm;  // backward_frozen: the final norm's weight gradient, dropped
  } scratch;
  float temperature = 1.0f;
  bool has_entropy = false;
  Truncation truncation;  // the forward's (backward differentiates the same log-probs)
  bool kept = false;      // the forward kept what backward reads (ForwardOptions::keep_activations)
  const LinearAdapters* adapters = nullptr;  // the forward's unmerged adapters (ForwardOptions::adapters)
};

// Takes over a frozen model's parameter gradients in Transformer::backward_frozen: the gradients of adapters on
// its Linear layers (model/lora.h), from each product's output gradient and input, chunk by chunk.
class FrozenGradients {
 public:
  virtual ~FrozenGradients() = default;
  // Layer l's gradient buffer and its length in floats: each thread's sum over its chunks (a buffer of that length,
  // zeroed) is added into it, in thread order, when the layer's backward ends.
  virtual std::pair<float*, int64_t> layer_span(int64_t layer) = 0;
  // Adds to `grads` (a thread's buffer of layer_span(layer)'s length) what a chunk of n rows contributes through one
  // Linear layer: dy (n, out) the gradient of its output, x (n, in) the input the forward multiplied (both F32, on
  // the host).
  // row0: the chunk's first row in the pass (an adapter dropout draws its masks by row).
  virtual void add(int64_t layer, LayerLinear linear, const Tensor& dy, const Tensor& x, float* grads,
                   int64_t row0) const = 0;
};

// One engine step flattened (nano-vllm's model_runner): N query rows of B sequences, prefill and decode mixed.
struct CachedStep {
  std::vector<int32_t> tokens;         // (N)
  std::vector<int32_t> positions;      // (N) position of each row within its sequence
  std::vector<int32_t> query_seq;      // (N) which of the B sequences each row belongs to
  std::vector<int32_t> slot_mapping;   // (N) cache slot each row's K/V goes to
  std::vector<int32_t> block_indptr;   // (B+1) CSR block tables
  std::vector<int32_t> block_indices;  // blocks of sequence b: [block_indptr[b], block_indptr[b+1])
  std::vector<int32_t> logits_rows;    // rows whose next-token logits are wanted (usually each sequence's last)
};

class Transformer {
 public:
  explicit Transformer(const ModelConfig& config, const ModelNumerics& numerics = {});

  const ModelConfig& config() const { return config_; }
  const ModelNumerics& numerics() const { return numerics_; }

  // Fills acts.logp (N) (and acts.entropy) for the batch, or acts.values (N) for a value-head model; keeps what
  // backward needs. Every op of forward and backward runs on ctx, and params (and backward's grads) must live on
  // its device (ParameterStore::on): on the host the products go through the packed kernel, row chunks side by
  // side on the threads; on a CUDA context through cuBLAS over the whole batch, the activations (acts.logp, ...)
  // on the device, from ctx's pool (read them back with ctx.copy). Parameters on another device are named at
  // the first op.
  void forward(const ExecContext& ctx, const ParameterStore& params, const PackedBatch& batch,
               const ForwardOptions& options, Activations& acts) const;

  // Called by backward as each layer's parameter gradients are complete, layers last to first, with the layer's
  // span [begin, end) in the flat buffer (layer_param_spans): data parallelism starts reducing them while the
  // earlier layers' backward runs.
  using GradsReadyFn = std::function<void(int64_t begin, int64_t end)>;

  // Accumulates dL/dparams into grads (same layout as params) from dL/dlogp (N) and optional dL/dentropy (N), host
  // arrays (uploaded to a device context).
  // acts is the forward's; backward uses its scratch and gives up its logits (one backward per forward). On the CPU
  // lm_head's input gradient (and a bf16 model's weight gradient) runs kLmHeadGradRows vocabulary rows at a time,
  // the blocks' products added in order.
  static constexpr int64_t kLmHeadGradRows = 16384;
  void backward(const ExecContext& ctx, const ParameterStore& params, Activations& acts, const float* dlogp,
                const float* dentropy, ParameterStore& grads, const GradsReadyFn& ready = {}) const;
  // The backward of a frozen model whose Linear layers carry adapters (model/lora.h): from dL/dlogp (and
  // dL/dentropy) as backward, down through every layer, each Linear layer's output gradient and input handed to
  // `grads` (FrozenGradients::add) instead of forming the weight's gradient. No parameter gradient is computed:
  // not the weights', the norms', the biases', the embeddings' nor the head's. Host contexts only.
  void backward_frozen(const ExecContext& ctx, const ParameterStore& params, Activations& acts, const float* dlogp,
                       const float* dentropy, FrozenGradients& grads) const;
  // The value-head model's backward: accumulates dL/dparams into grads from dL/dvalue (N).
  void backward_values(const ExecContext& ctx, const ParameterStore& params, Activations& acts, const float* dvalue,
                       ParameterStore& grads, const GradsReadyFn& ready = {}) const;
  // Each decoder layer's span [begin, end) of the flat parameter buffer, layer 0 first; the rest of the buffer
  // (embeddings, final norm, head) belongs to no layer.
  std::vector<std::pair<int64_t, int64_t>> layer_param_spans() const;

  // Runs the step's rows through the model, writing their K/V into the cache, and returns the logits
  // (logits_rows.size(), V) of the requested rows (untempered), on ctx's device. On a CUDA context the cache is
  // on the device and `packed` the weights prepared there (prepare_decode_weights), multiplied through cuBLAS
  // over all rows at once. On the host, with `packed` (packed from `params`) every
  // matmul is ops::matmul_packed and each row's logits are bit-identical whatever the other rows of the step
  // (batch-invariant); without, the matmuls go through OpenBLAS (same values up to float rounding). A large
  // step whose sequences each own a contiguous run of rows is split between threads by sequence, each range
  // running all layers on its own: a slot written in the step must not be read by another sequence's rows
  // (the engine's copy-on-write of shared blocks guarantees it). Results do not depend on the split.
  // The step's buffers (and the returned logits) come from ctx's pool: a step of a shape seen before
  // allocates nothing from the system.
  // `adapters`: unmerged adapters beside the weights (LinearAdapters; host contexts).
  Tensor forward_cached(const ExecContext& ctx, const ParameterStore& params, const CachedStep& step,
                        KVCache& cache, const PackedWeights* packed = nullptr,
                        const LinearAdapters* adapters = nullptr) const;
  // Packs the matmul weights of `params` (CPU) in the numerics' formats for forward and forward_cached, or
  // their fp32 transposes for backward, reusing `out`'s buffers.
  void pack_weights(const ExecContext& ctx, const ParameterStore& params, PackedWeights& out,
                    bool transposed = false) const;
  // The weights forward_cached decodes with, from host parameters: pack_weights in batch-invariant numerics,
  // else the OpenBLAS decode's (PackedWeights::blas). On a CUDA context: the parameters as the numerics compute
  // with them, on the device (rounded there to the compute dtype; a quantised format dequantised on the host
  // first), and the RoPE table; `out`'s device buffers are reused from one policy version to the next.
  // self_contained: also copy what else the decode reads (PackedWeights), where the decode would read the
  // parameters themselves (the panels' decode; the fp32 OpenBLAS decode reads the parameters whole and stays not
  // self-contained).
  void prepare_decode_weights(const ExecContext& ctx, const ParameterStore& params, PackedWeights& out,
                              bool self_contained = false) const;

 private:
  // The executors (model/executor.h) prepare decode weights from the parameters' per-layer views.
  friend class CpuExecutor;
  friend class CudaExecutor;
  // Offsets (in floats) of each layer's weights in the flat parameter buffer; -1 when absent.
  struct LayerOffsets {
    int64_t ln1, qkv_w, qkv_b, o_w, o_b, ln2, gate_up, down, q_norm, k_norm;
    int64_t begin, end;  // the span of all the layer's parameters
  };
  struct Weights;  // per-layer views, built per call from a ParameterStore
  struct LayerWeights;
  Weights views(const ParameterStore& params) const;
  // The non-product weights of self-contained prepared weights (PackedWeights::embed, ...); the products' are
  // the panels.
  Weights prepared_views(const PackedWeights& packed) const;
  // Views of layer l's parameters in a buffer holding that layer's span only (a thread's gradients, or the
  // layer's span of the parameters), in `dtype`.
  LayerWeights layer_views(int64_t l, void* span, Device device, DType dtype = DType::kF32) const;
  // A bf16-held store's vectors (norms, biases, a score head) replaced by fp32 copies (exact).
  static void widen_vectors(Weights& w);
  // From dL/d(final norm output) (N,C) down to the embedding; shared by both heads.
  // From acts.scratch.dxn_final down; `packed`: the weights go through the packed kernel transposed (CPU), one
  // layer at a time in acts.scratch.wt.layers[0], else the products go through ops::matmul.
  // frozen: the products' gradients go to it, no parameter's is formed (backward_frozen); g is then unused.
  void backward_body(const ExecContext& ctx, const Weights& w, bool packed, Weights& g, Activations& acts,
                     const GradsReadyFn& ready, FrozenGradients* frozen = nullptr) const;
  // dL/dlogp (and dL/dentropy) through log-softmax and the head into acts.scratch.dxn_final; the head's weight
  // gradient accumulated into dlm_head when given. Returns whether the backward packs its weights (CPU).
  bool head_backward(const ExecContext& ctx, const Weights& w, Activations& acts, const float* dlogp,
                     const float* dentropy, Tensor* dlm_head) const;
  // dx = dlogits · lm_head on the CPU, kLmHeadGradRows vocabulary rows at a time (block_t holds a block's
  // transposed panels in `math`, the backward's); with dlm_head, its rows += the block's dlogits^T · xn in `math`.
  void lm_head_grads_in_blocks(const ExecContext& ctx, const Tensor& dlogits, const Tensor& lm_head, const Tensor& xn,
                               Tensor* dlm_head, DType math, ops::PackedWeight& block_t, Tensor& dx) const;
  // The one layer body (transformer_layers.cpp) of the training forward and the cached decode, in the model's
  // numerics: norm, qkv (+ bias), (Qwen3: q_norm, k_norm per head,) RoPE, attention, o + residual, norm, gate_up,
  // SwiGLU, down + residual.
  // P: the layer's packed weights (else OpenBLAS on W); biases from P when it has rounded ones.
  void layer_body(const ExecContext& ctx, const LayerWeights& W, const PackedWeights::Layer* P, LayerRows& r,
                  const LayerAttention& attend) const;
  // One layer on one chunk of rows (transformer_layers.cpp): forward from A.x into A's rows and x_next (keep),
  // or from x_next's rows into themselves through the chunk's F32 rows (!keep: x_next is the F32 residual
  // stream); backward from dx (d x_next on entry, d x on exit) into the parameter gradients G.
  void layer_forward(const ExecContext& ctx, const LayerWeights& W, const PackedWeights::Layer* P, LayerActivations& A,
                     Tensor& x_next, const RowChunk& rows, const Tensor& positions, const Tensor& rope,
                     ChunkScratch& s, bool keep, const LinearAdapters* adapters, int64_t layer) const;
  // frozen (backward_frozen): the products' gradients go to frozen->hook (layer frozen->layer, the thread's buffer
  // frozen->grads) instead of G's weights; G then receives only the norms' and biases' gradients, which are dropped.
  struct FrozenChunk {
    const FrozenGradients* hook;
    int64_t layer;
    float* grads;
    const LinearAdapters* adapters;  // the forward's unmerged adapters (their input gradients), or null
  };
  void layer_backward(const ExecContext& ctx, const LayerWeights& W, const PackedWeights::Layer* P, LayerWeights& G,
                      const LayerActivations& A, Tensor& dx, const RowChunk& rows, const Tensor& positions,
                      const Tensor& rope, ChunkScratch& s, const FrozenChunk* frozen = nullptr) const;
  // All layers forward / backward over acts.chunks, run by ctx's executor (side by side on the CPU's threads).
  // `packed`: the one layer's worth of panels into which each layer's weights are packed just before it runs
  // (transposed for the backward), so that training holds one layer of panels, not a second copy of the model;
  // null: the products go through ops::matmul.
  // keep: as ForwardOptions::keep_activations (else the residual stream is acts.x_final, in place).
  void forward_layers(const ExecContext& ctx, const Weights& w, PackedWeights::Layer* packed, Activations& acts,
                      bool keep) const;
  void backward_layers(const ExecContext& ctx, const Weights& w, PackedWeights::Layer* packed, Weights& g,
                       Activations& acts, const GradsReadyFn& ready, FrozenGradients* frozen) const;
  // Packs the given matrices (forward formats, or transposed fp32), side by side where the executor has threads.
  struct PackJob {
    const Tensor* weight;
    ops::PackedWeight* out;
    DType format;
  };
  void run_pack_jobs(const ExecContext& ctx, const std::vector<PackJob>& jobs, bool transposed) const;
  // One layer's panels (and its biases rounded to the compute dtype, for the forward).
  void pack_layer(const ExecContext& ctx, const LayerWeights& W, PackedWeights::Layer& out, bool transposed) const;

  ModelConfig config_;
  ModelNumerics numerics_;
  std::vector<LayerOffsets> layer_offsets_;
  int64_t embed_offset_ = 0, final_norm_offset_ = 0, lm_head_offset_ = 0;
  int64_t score_w_offset_ = -1, score_b_offset_ = -1;  // value head only
  // The RoPE table (max_positions, head_dim), on the host.
  Tensor rope_;
};

}  // namespace rlcpp
