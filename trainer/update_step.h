// One optimizer step over a global batch split into micro-batches: forward, loss gradient, backward and
// gradient accumulation per micro-batch, then clipping and AdamW. The loss callback normalises by the GLOBAL
// batch (token count or sequence count of all micro-batches), so the sum over micro-batches is the global loss
// and the update does not depend on how the batch was split.
//
// The same updater trains a policy (the loss returns dL/dlogp, and dL/dentropy with an entropy bonus) and a
// critic (a value-head model: the loss returns dL/dvalue; see model/transformer.h for the value convention).
//
// NaN guard: a step whose loss or gradient norm is not finite is skipped before AdamW, so the weights, the
// optimizer moments and its step count stay bit-identical; it is counted, and max_bad_steps skipped steps in a
// row stop the run with an error (a finite step resets the count). A step whose update leaves the weights
// non-finite (an overflow: lr too large) stops the run at once, naming the step and the tensor.
//
// Data-parallel (set_communicator): the micro-batches are sharded over the ranks and the gradients summed
// before the NaN guard, so every rank decides alike.
//
// On a CUDA context the updater trains on the device: the master weights, gradients and AdamW moments live
// there, every forward, backward, clipping and AdamW step runs there (the finiteness check of the new weights
// too), and refresh_host_weights copies the new weights to the host store the updater was given (the run's
// weights: checkpoints, weight sync, evaluation read it) — once per update (update_actor, update_critic, DPO's
// update call it at their end), not per optimizer step: 2 GB of fp32 W2 weights is ~40 ms at PCIe's pinned rate.
// The loss callback sees the forward's log-probs (entropy, values) on the host.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/adamw.h"
#include "model/lora.h"
#include "model/lora_unmerged.h"
#include "model/transformer.h"
#include "trainer/communicator.h"
#include "trainer/loss_output.h"
#include "trainer/optim_config.h"

namespace rlcpp {

// The loss of micro-batch `micro` from its forward outputs: LossOutput.loss is its contribution to the step's
// loss; dlogp (N) for a policy (dentropy (N) or empty), dvalue (N) for a critic, N = acts.num_tokens; metrics
// are merged over the micro-batches.
using MicroLossFn = std::function<LossOutput(size_t micro, const Activations& acts)>;

struct UpdateResult {
  double loss = 0;
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool skipped = false;  // non-finite loss or gradient: weights and optimizer state untouched
  int64_t tokens = 0;
  LossMetrics metrics;   // the micro-batches' LossMetrics merged (over every rank's, data-parallel)
  std::optional<double> allreduce_wait_s;  // data-parallel: seconds waited for the gradient all-reduce
};

// The step's metrics as logged, verl's names under `prefix` (e.g. "actor/"): the merged loss metrics plus
// grad_norm and lr.
std::map<std::string, double> step_metrics(const UpdateResult& result, const std::string& prefix);

// A micro-batch's logits (tokens x vocabulary floats) and, in its backward, their gradient, against the memory the
// machine has available (`available_bytes`, MemAvailable; < 0: unknown, no check): past it the kernel's OOM killer
// would end the run without a word, so this throws first, naming the sizes and the micro-batch keys to lower.
void check_logits_fit(int64_t tokens, int64_t vocab, int64_t available_bytes);

// LoRA (model/lora.h): the updater trains the adapters of a frozen base. The weights it is given are then the
// merged weights (base + s·B·A), which it recomputes from the base and the adapters after every applied step; the
// gradients, the clipping and the AdamW moments are the adapters' (A and B, fp32), and data-parallel ranks sum the
// adapters' gradients. Host only.
// With LoRA dropout (LoraConfig::dropout > 0) the training forward runs the adapters unmerged beside the base (as held)
// (model/lora_unmerged.h), each adapter's input masked (lora_dropout_scale, keyed by `dropout_seed`, the optimizer
// step and the micro-batch: the same masks on any data-parallel layout and after a resume); the backward sees the
// same masks.
// The key of LoRA dropout's masks (lora_dropout_scale) for micro-batch `micro` of the step after `steps_taken`
// optimizer steps of a run seeded `seed`.
uint64_t lora_dropout_key(uint64_t seed, int64_t steps_taken, int64_t micro);

struct LoraTraining {
  const LoraBase* base = nullptr;       // the frozen base
  LoraAdapters* adapters = nullptr;      // null: full fine-tuning
  uint64_t dropout_seed = 0;
  bool enabled() const { return adapters != nullptr; }
  bool dropout() const { return adapters != nullptr && adapters->config().dropout > 0; }
};

class PolicyUpdater {
 public:
  // params: host weights, updated in place by every optimizer step (on a device context, by
  // refresh_host_weights). With `lora`, the merged weights of lora.base and lora.adapters.
  PolicyUpdater(const Transformer& model, ParameterStore& params, const OptimConfig& config,
                const ExecContext& context = ExecContext::cpu(), const LoraTraining& lora = {});

  // total_steps sizes the LR schedule. Throws when max_bad_steps non-finite steps come in a row, or when the
  // update made the weights non-finite.
  UpdateResult step(const std::vector<PackedBatch>& micro_batches, const ForwardOptions& options,
                    const MicroLossFn& loss_fn, int64_t total_steps);

  const Transformer& model() const { return model_; }
  // Where its forwards, backwards and AdamW run, and what a caller running the same model's passes for this
  // updater (old or reference log-probs) runs them on.
  const ExecContext& context() const { return context_; }
  const ParameterStore& params() const { return params_; }  // the host weights (refresh_host_weights first)
  // The weights it trains on its context's device: params() on the host, the device copy on a GPU (what a
  // cuda-ipc weight sync exports). Updated in place by every applied step.
  const ParameterStore& device_weights() const { return device_params_ ? *device_params_ : params_; }
  // The host weights were overwritten (a resume loaded a checkpoint into them): copies them to the device.
  void host_weights_changed();
  // On a device context: copies the device weights to the host store when an applied step changed them since
  // the last copy (a no-op on the host, where the steps update the store itself). Call before the host store is
  // read: the end of an update.
  void refresh_host_weights();
  const OptimConfig& config() const { return config_; }
  AdamW& optimizer() { return adamw_; }
  // The gradient of what it trains: the parameters' layout, or the adapters' (LoRA).
  const ParameterStore& grads() const { return grads_; }
  const LoraTraining& lora() const { return lora_; }
  // Data parallelism (null or a world of one: none): each step runs this rank's shard of the micro-batches and
  // sums the gradients, loss and metrics over the ranks before clipping and AdamW, so every rank takes the same
  // step — the global batch's, up to the order of the gradient sum (trainer/gradient_buckets.h).
  void set_communicator(Communicator* comm);
  // Ordered gradient sums (trainer.grad_shards = S > 1): each mini-batch's micro-batches are cut into S
  // contiguous shards whose gradients are summed from zero each, then added in shard order — alone, this process
  // does all S; as one of S data-parallel ranks, its own, the ranks' gathered and added in rank order. Either way
  // the same float operations in the same order: S ranks give one process's update bit for bit.
  void set_grad_shards(int64_t shards) { grad_shards_ = shards; }
  int64_t bad_steps_in_a_row() const { return bad_in_a_row_; }
  // Tokens (prompt + response) through this updater's forward + backward since it was made, over every step
  // (and every data-parallel rank's shard): the trained tokens that training tokens/s and MFU count.
  int64_t tokens_trained() const { return tokens_trained_; }
  int64_t bad_steps_total() const { return bad_total_; }
  // Throws "WHAT: all N optimizer steps ... were skipped" when every step this updater was asked for had a
  // non-finite loss or gradient (fewer than max_bad_steps of them, so none stopped the run): a run that ends
  // so has not trained at all. Call it at a run's last step, before its final checkpoint.
  void check_some_step_applied(const std::string& what) const;

 private:
  const Transformer& model_;
  ParameterStore& params_;
  ExecContext context_;
  // On a device context, the weights the updater trains there (params_ holds their copy after each step).
  std::optional<ParameterStore> device_params_;
  bool host_stale_ = false;  // an applied step changed device_params_ since their last copy to params_
  OptimConfig config_;
  LoraTraining lora_;
  std::optional<UnmergedLora> dropped_;  // LoRA dropout: this step's adapters, run unmerged with masked inputs
  ParameterStore grads_;
  AdamW adamw_;
  Activations acts_;
  Activations host_outputs_;  // a device forward's logp, entropy and values, copied for the loss callback
  int64_t bad_in_a_row_ = 0;
  int64_t bad_total_ = 0;
  int64_t steps_asked_ = 0;
  int64_t tokens_trained_ = 0;
  Communicator* comm_ = nullptr;
  int64_t grad_shards_ = 0;
  std::optional<ParameterStore> shard_grads_;  // a later shard's gradient (grad_shards > 1, one process), on first use
  std::vector<float> gathered_;  // the ranks' gradients of an ordered sum (grad_shards > 1, data-parallel)

  ParameterStore& work_params() { return device_params_ ? *device_params_ : params_; }
  // The forward's outputs the loss reads, on the host: acts_ itself, or copies in host_outputs_.
  const Activations& loss_inputs();
  // Forward, loss and backward of micro-batch m, its gradient accumulated into `into`; `ready` as backward's.
  void accumulate_micro_batch(const std::vector<PackedBatch>& micro_batches, size_t m, const ForwardOptions& options,
                              const MicroLossFn& loss_fn, ParameterStore& into,
                              const Transformer::GradsReadyFn& ready, UpdateResult& result);
};

}  // namespace rlcpp
