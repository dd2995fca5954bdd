// LoRA adapters over a frozen model (Hu et al. 2021; Hugging Face PEFT's LoraConfig): each targeted Linear weight
// W (out, in) of every decoder layer becomes W + s·B·A with A (r, in), B (out, r) and s = alpha / r; only A and B
// train. B starts at zero (A uniform in ±1/sqrt(in), PEFT's kaiming_uniform(a=√5)), so step 0 is the base model.
//
// How rlcpp computes with them: merged (with LoRA dropout, the update's forward runs them unmerged beside the base:
// model/lora_unmerged.h; so may the engine, rollout.lora_merge). After every optimizer step the adapters are folded into a copy of the
// base (merge), and the trainer's forward, the rollout engine and evaluation all run that merged model. The
// merge is a fixed fma chain over r per entry (the same bits in any process, on any thread count), so a trainer
// and an engine that merge the same adapters hold the same weights and their log-probs agree exactly, as in full
// fine-tuning. The adapters' gradients come from each Linear layer's output gradient dy and input x
// (Transformer::backward_frozen hands them over, chunk by chunk): with u = x·Aᵀ and v = dy·B, dB = s·dyᵀ·u and
// dA = s·vᵀ·x, which are s·dW·Aᵀ and s·Bᵀ·dW without forming dW = dyᵀ·x (rank r instead of a product of the
// weight's size). The frozen base is also the reference policy of a KL term: no second model in memory.
//
// Files are PEFT's: adapter_config.json + adapter_model.safetensors (tensor names
// base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight, ...), which peft's PeftModel.from_pretrained
// opens over the same base, and which rlcpp opens when PEFT wrote them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/exec_context.h"
#include "core/tensor.h"
#include "model/parameters.h"
#include "model/transformer.h"

namespace rlcpp {

// The Linear layers a LoRA can target, Hugging Face's module names (PEFT's target_modules).
inline const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"q_proj", "k_proj",    "v_proj", "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

struct LoraConfig {
  int64_t rank = 0;  // r; 0: no adapters (full fine-tuning)
  double alpha = 16;  // lora_alpha: the update is scaled by alpha / rank
  std::vector<std::string> targets = lora_target_names();  // or {"all-linear"}
  double dropout = 0;  // lora_dropout: the training forward's adapter inputs dropped with this probability
  std::string base_dtype = "fp32";  // how the frozen base is held: "fp32", or "bf16" (half the bytes; LoraBase)

  bool enabled() const { return rank > 0; }
  float scale() const { return static_cast<float>(alpha / static_cast<double>(rank)); }
  // The targets in lora_target_names() order ("all-linear" expanded).
  std::vector<std::string> resolved_targets() const;
  // Throws naming `prefix` + the key (e.g. "trainer.lora.rank") for a value out of range.
  void validate(const std::string& prefix) const;
  bool operator==(const LoraConfig&) const = default;
  // The same adapters' shapes and scale (rank, alpha, targets), however the base is held.
  bool same_adapters(const LoraConfig& other) const {
    return rank == other.rank && alpha == other.alpha && resolved_targets() == other.resolved_targets();
  }

  template <class V> void visit(V& v) {
    v("rank", rank, "LoRA rank r: train adapters A (r, in) and B (out, r) on a frozen base (0: full fine-tuning)");
    v("alpha", alpha, "lora_alpha: the adapters' update is scaled by alpha / rank");
    v("targets", targets,
      "the Linear layers adapted in every decoder layer: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
      "down_proj, or all-linear");
    v("dropout", dropout,
      "lora_dropout, in [0, 1): the training forward drops each adapter input with this probability (PEFT's "
      "nn.Dropout before A; the update then runs the adapters unmerged beside the base); log-probs that score "
      "samples (old, reference, the engine's) have none");
    v("base_dtype", base_dtype,
      "how the frozen base is held: fp32, or bf16 (half its bytes: the initial weights are rounded to bf16 first, "
      "and the base is also the reference policy and what unmerged adapters run beside)");
  }
  DType base_storage() const { return base_dtype == "bf16" ? DType::kBF16 : DType::kF32; }
};

// The adapters' shapes as a LoRA base message carries them to a worker (weightsync/zmq_channel.h): {"rank",
// "alpha", "targets"} (the targets resolved), and back, checked (errors name the field). The message may add
// "unmerged": true (rollout.lora_merge false: the worker applies the adapters unmerged), which the worker reads.
Json lora_config_to_wire(const LoraConfig& config);
LoraConfig lora_config_from_wire(const Json& wire);

// One adapted matrix: the rows [row, row + out) of a (fused) Linear weight, its A and B in the adapters' store.
struct LoraTarget {
  int64_t layer = 0;
  std::string module;      // "q_proj", ...
  LayerLinear linear = LayerLinear::kQkv;  // the product it is part of
  int64_t row = 0;         // its first output row in that (fused) product: k_proj's is q_proj's out, ...
  int64_t weight = 0;      // offset (floats) of the module's (out, in) weight in the model's parameter buffer
  int64_t out = 0, in = 0;
  int64_t a = 0, b = 0;    // offsets of A (r, in) and B (out, r) in the adapters' buffer
};

// The frozen base a LoRA run merges its adapters into: the model's layout, held in fp32 or in bf16
// (LoraConfig::base_dtype: 494M parameters in 1 GB instead of 2 GB). Either way it is also the run's reference
// policy (the base with the adapters off) and the weights that unmerged adapters run beside (a dropout forward,
// an unmerged engine): the Transformer's passes read a bf16-held store as the fp32 one of its values. A bf16 base
// is exact only when the weights were bf16 already: frozen_from rounds the initial policy first, as a Hugging
// Face checkpoint stored in bf16 already is.
class LoraBase {
 public:
  LoraBase() = default;
  // `weights` (fp32, on the host) in `dtype`: fp32 shares their buffer (no copy); bf16 converts them (rounded to
  // nearest even).
  LoraBase(const ParameterStore& weights, DType dtype);
  // The base of a run starting from `policy`: policy rounded to bf16 in place first when `dtype` is bf16 (the
  // merged model then starts exactly at the base), and a copy of it, so that the policy may train.
  static LoraBase frozen_from(ParameterStore& policy, DType dtype);

  DType dtype() const { return weights_.dtype(); }
  int64_t numel() const { return weights_.numel(); }
  // The base as it is held (fp32 or bf16): a forward's weights.
  const ParameterStore& weights() const { return weights_; }
  // out[0, n) = the base's values [offset, offset + n), widened to fp32 (exactly).
  void read(const ExecContext& ctx, int64_t offset, int64_t n, float* out) const;

 private:
  ParameterStore weights_;
};

class LoraAdapters {
 public:
  LoraAdapters() = default;
  // Zero adapters (A and B) for `model`; init() draws A.
  LoraAdapters(const ModelConfig& model, const LoraConfig& config);

  const LoraConfig& config() const { return config_; }
  const std::vector<LoraTarget>& targets() const { return targets_; }
  // A and B of every target, PEFT's names, layer by layer; the optimizer's parameters.
  ParameterStore& weights() { return weights_; }
  const ParameterStore& weights() const { return weights_; }
  // Each layer's span [begin, end) of the adapters' buffer; all of them, layer 0 first.
  std::pair<int64_t, int64_t> layer_span(int64_t layer) const;
  const std::vector<std::pair<int64_t, int64_t>>& layer_spans() const { return layer_spans_; }

  // PEFT's initialisation from `seed`: A ~ U(-1/sqrt(in), 1/sqrt(in)), B = 0.
  void init(uint64_t seed);
  // merged := base with s·B·A added to every target (base and merged have the model's layout; they may not
  // share a buffer). Entry (o, i) is base + s·(Σ_k B[o,k]·A[k,i]), the sum an fma chain in k order: the same bits
  // wherever it runs.
  void merge(const ExecContext& ctx, const LoraBase& base, ParameterStore& merged) const;
  void merge(const ExecContext& ctx, const ParameterStore& base, ParameterStore& merged) const {
    merge(ctx, LoraBase(base, DType::kF32), merged);
  }
  // The targets' rows of `merged` recomputed from `base` (after the adapters changed); the rest is left as is.
  void remerge(const ExecContext& ctx, const LoraBase& base, ParameterStore& merged) const;

  // DIR/adapter_config.json + DIR/adapter_model.safetensors, as PEFT writes them (`base_model` recorded as
  // base_model_name_or_path). Written to temporary names and renamed.
  void save_peft(const std::string& dir, const std::string& base_model = "") const;
  // Adapters from a PEFT directory for `model`: rank, alpha, targets and dropout from its adapter_config.json
  // (errors name the file and the key: a non-LoRA type, bias, DoRA, rsLoRA, per-module ranks, a module or
  // shape that does not fit the model).
  static LoraAdapters load_peft(const std::string& dir, const ModelConfig& model);

 private:
  LoraConfig config_;
  std::vector<LoraTarget> targets_;
  std::vector<std::pair<int64_t, int64_t>> layer_spans_;
  ParameterStore weights_;
};

// LoRA dropout's mask (LoraConfig::dropout = p): the factor that the input column `col` of row `row` of adapted
// matrix `target` (its index in LoraAdapters::targets()) is multiplied by in a pass drawn with `key`: 0 with
// probability p, else 1 / (1 - p) (inverted dropout, as torch's nn.Dropout). A pure function of its arguments
// (Philox-4x32 at counter (target, row, col / 4)): a backward, another thread split or a test draws the same.
float lora_dropout_scale(uint64_t key, int64_t target, int64_t row, int64_t col, float p);

// lora_dropout_scale for columns [0, n) of row `row` of adapted matrix `target`, into scale[0, n): the same values,
// one Philox draw per 4 columns, 16 draws at a time.
void lora_dropout_scales(uint64_t key, int64_t target, int64_t row, float p, int64_t n, float* scale);

// The adapters' gradients for Transformer::backward_frozen, accumulated into `grads` (the adapters' layout).
// `dropout` (a training forward with LoRA dropout): the masked inputs its adapters saw, by the same key.
struct LoraDropout {
  float p = 0;
  uint64_t key = 0;
  bool active() const { return p > 0; }
};
class LoraGradients : public FrozenGradients {
 public:
  LoraGradients(const LoraAdapters& adapters, ParameterStore& grads, LoraDropout dropout = {});
  std::pair<float*, int64_t> layer_span(int64_t layer) override;
  // For each target of the product: u = x·Aᵀ, v = s·dy_t·B (dy_t: its columns of dy), dB += dy_tᵀ·(s·u),
  // dA += vᵀ·x; loops whose inner dimension is contiguous, in a fixed order.
  void add(int64_t layer, LayerLinear linear, const Tensor& dy, const Tensor& x, float* grads,
           int64_t row0) const override;

 private:
  const LoraAdapters& adapters_;
  ParameterStore& grads_;
  LoraDropout dropout_;
};

// True when `dir` holds a PEFT adapter (adapter_config.json).
bool is_peft_adapter_dir(const std::string& dir);

}  // namespace rlcpp
