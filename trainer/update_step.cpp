#include "trainer/update_step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/philox.h"
#include "core/process_memory.h"
#include "model/finite_weights.h"
#include "trainer/gradient_buckets.h"

namespace rlcpp {

PolicyUpdater::PolicyUpdater(const Transformer& model, ParameterStore& params, const OptimConfig& config,
                             const ExecContext& context, const LoraTraining& lora)
    : model_(model), params_(params), context_(context), config_(config), lora_(lora) {
  config_.validate();
  RLCPP_CHECK(params.flat().on_host(), "PolicyUpdater: the weights it is given must be on the host");
  if (lora_.enabled()) {
    RLCPP_CHECK(context_.is_host(), "LoRA (trainer.lora.rank > 0) trains on the host; the trainer's device is "
                                        << context_.name());
    RLCPP_CHECK(lora_.base && lora_.base->numel() == params.numel() && !model.config().value_head,
                "PolicyUpdater: LoRA needs the frozen base of the policy's layout");
    grads_ = lora_.adapters->weights().clone();
    context_.fill_zero(grads_.flat());
  } else {
    grads_ = ParameterStore(params.config());
  }
  if (!context_.holds(params.flat())) {  // a context off the host trains a copy in its memory
    device_params_.emplace(params.on(context_));
    grads_ = grads_.on(context_);
  }
  ops::AdamWParams hyper;
  hyper.lr = static_cast<float>(config_.lr);
  hyper.beta1 = static_cast<float>(config_.beta1);
  hyper.beta2 = static_cast<float>(config_.beta2);
  hyper.eps = static_cast<float>(config_.eps);
  hyper.weight_decay = static_cast<float>(config_.weight_decay);
  adamw_ = AdamW(lora_.enabled() ? lora_.adapters->weights() : params_, hyper, context_);
}

void PolicyUpdater::set_communicator(Communicator* comm) {
  RLCPP_CHECK(comm == nullptr || comm->size() <= 1 || context_.is_host(),
              "PolicyUpdater: data-parallel ranks train on the host (their gradient sums are MPI's); a trainer on "
                  << context_.name() << " runs as one rank");
  comm_ = comm;
}

void PolicyUpdater::host_weights_changed() {
  if (device_params_) context_.copy(params_.flat(), device_params_->flat());
  host_stale_ = false;
}

void PolicyUpdater::refresh_host_weights() {
  if (!device_params_ || !host_stale_) return;
  context_.copy(device_params_->flat(), params_.flat());
  host_stale_ = false;
}

const Activations& PolicyUpdater::loss_inputs() {
  if (context_.is_host()) return acts_;
  Activations& h = host_outputs_;
  h.num_tokens = acts_.num_tokens;
  auto to_host = [&](const Tensor& from, Tensor& to) {
    if (!from.defined()) {
      to = Tensor();
      return;
    }
    if (!to.defined() || to.shape() != from.shape()) to = Tensor::empty(from.shape());
    context_.copy(from, to);
  };
  to_host(model_.config().value_head ? Tensor() : acts_.logp, h.logp);
  to_host(acts_.has_entropy ? acts_.entropy : Tensor(), h.entropy);
  to_host(model_.config().value_head ? acts_.values : Tensor(), h.values);
  h.has_entropy = acts_.has_entropy;
  h.temperature = acts_.temperature;
  return h;
}

uint64_t lora_dropout_key(uint64_t seed, int64_t steps_taken, int64_t micro) {
  const uint64_t step = static_cast<uint64_t>(steps_taken);
  const PhiloxDraw key = philox_draw(seed, static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                                     static_cast<uint32_t>(micro), 0xD0u);
  return (static_cast<uint64_t>(key.v[0]) << 32) | key.v[1];
}

void check_logits_fit(int64_t tokens, int64_t vocab, int64_t available_bytes) {
  const double need = 2.0 * 4.0 * static_cast<double>(tokens) * static_cast<double>(vocab);
  if (available_bytes < 0 || need <= static_cast<double>(available_bytes)) return;
  char sizes[160];
  std::snprintf(sizes, sizeof sizes, "%.2f GB for its logits and their gradient, more than the %.2f GB",
                need / 1e9, static_cast<double>(available_bytes) / 1e9);
  RLCPP_FAIL("trainer: a micro-batch of " << tokens << " tokens with a vocabulary of " << vocab << " needs " << sizes
                                          << " this machine has available (MemAvailable): lower the micro-batch "
                                          << "size (ppo.micro_batch_size, an SFT warm start's "
                                          << "warm_start.sft.micro_batch_size, or micro_batch_size in sft and dpo "
                                          << "configs)");
}

UpdateResult PolicyUpdater::step(const std::vector<PackedBatch>& micro_batches, const ForwardOptions& options,
                                 const MicroLossFn& loss_fn, int64_t total_steps) {
  RLCPP_CHECK(!micro_batches.empty(), "PolicyUpdater::step: no micro-batches");
  if (!model_.config().value_head && context_.is_host()) {
    int64_t tokens = 0;
    for (const PackedBatch& b : micro_batches) tokens = std::max(tokens, b.num_tokens());
    check_logits_fit(tokens, model_.config().vocab_size, available_memory_bytes());
  }
  if (lora_.dropout()) dropped_.emplace(*lora_.adapters);  // this step's adapters (the last step changed them)
  UpdateResult result;
  result.lr = config_.lr_at(adamw_.steps_taken(), total_steps);
  context_.fill_zero(grads_.flat());
  const bool critic = model_.config().value_head;
  const size_t count = micro_batches.size();
  // The shards whose gradients this process sums, each from zero and then in shard order: with data
  // parallelism, this rank's (the ranks' are then summed over the communicator, in rank order when
  // grad_shards_ > 1); alone, grad_shards_ of them (the ranks it stands for), or one run of all.
  const bool parallel = comm_ != nullptr && comm_->size() > 1;
  std::vector<std::pair<size_t, size_t>> shards;
  if (parallel)
    shards.push_back(rank_shard(count, comm_->rank(), comm_->size()));
  else
    for (int64_t s = 0; s < std::max<int64_t>(grad_shards_, 1); ++s)
      shards.push_back(rank_shard(count, static_cast<int>(s), static_cast<int>(std::max<int64_t>(grad_shards_, 1))));
  std::optional<GradientBuckets> buckets;
  // A LoRA run's gradient is its adapters' (reduced whole at the end: the frozen backward starts no bucket).
  if (parallel)
    buckets.emplace(*comm_, lora_.enabled() ? lora_.adapters->layer_spans() : model_.layer_param_spans(), grads_,
                    grad_shards_ > 1 ? &gathered_ : nullptr);
  for (size_t s = 0; s < shards.size(); ++s) {
    ParameterStore* into = &grads_;
    if (s > 0) {  // a later shard from zero, then added: the sum a rank of its own would send
      if (!shard_grads_)
        shard_grads_.emplace(lora_.enabled() ? grads_.clone() : ParameterStore(params_.config()).on(context_));
      context_.fill_zero(shard_grads_->flat());
      into = &*shard_grads_;
    }
    for (size_t m = shards[s].first; m < shards[s].second; ++m) {
      // The sum over the ranks starts bucket by bucket in the backward of this rank's last micro-batch.
      const bool last = buckets && m + 1 == shards[s].second;
      accumulate_micro_batch(micro_batches, m, options, loss_fn, *into, last ? buckets->on_ready() : nullptr, result);
    }
    if (s > 0) ops::add_inplace(context_, grads_.flat(), shard_grads_->flat());
  }
  if (buckets) {
    result.allreduce_wait_s = buckets->finish();
    reduce_loss_over_ranks(*comm_, result.loss, result.tokens, result.metrics);
  }
  // The last micro-batch's activations (and the backward's scratch: lm_head's transposed panels, the logits'
  // gradient) go back to the pool: between updates the trainer holds its weights, gradient and moments, not
  // 1.6 GB of a 0.5B model's activations that the rollout and evaluation could use.
  acts_ = Activations();
  tokens_trained_ += result.tokens;  // through forward + backward, whether AdamW then applies the step or not
  result.grad_norm = clip_grad_norm(context_, grads_, config_.grad_clip);
  ++steps_asked_;
  if (!std::isfinite(result.loss) || !std::isfinite(result.grad_norm)) {
    result.skipped = true;
    ++bad_total_;
    ++bad_in_a_row_;
    RLCPP_CHECK(bad_in_a_row_ < config_.max_bad_steps,
                "training stopped: " << bad_in_a_row_ << " optimizer steps in a row had a non-finite loss ("
                                     << result.loss << ") or gradient norm (" << result.grad_norm
                                     << "); lower optim.lr or check the data (optim.max_bad_steps = "
                                     << config_.max_bad_steps << ")");
    return result;
  }
  bad_in_a_row_ = 0;
  if (lora_.enabled()) {
    adamw_.step(context_, lora_.adapters->weights(), grads_, static_cast<float>(result.lr));
    if (const auto bad = find_non_finite(context_, lora_.adapters->weights()))
      RLCPP_FAIL("training stopped: the LoRA adapters became non-finite at optimizer step "
                 << adamw_.steps_taken() << " (loss " << result.loss << ", gradient norm " << result.grad_norm
                 << ", lr " << result.lr << "; lower optim.lr): " << bad->describe());
    lora_.adapters->remerge(context_, *lora_.base, params_);
  } else {
    adamw_.step(context_, work_params(), grads_, static_cast<float>(result.lr));
  }
  host_stale_ = device_params_.has_value();
  // A finite gradient can still overflow the weights (a huge lr: 1e308 is inf in fp32). They cannot be taken
  // back, so the run stops here, before a rollout samples from them or a checkpoint saves them. One pass where
  // they live; the host reads them only to name the tensor.
  if (const auto bad = find_non_finite(context_, work_params()))
    RLCPP_FAIL("training stopped: the " << (critic ? "critic's " : "") << "weights became non-finite at "
               << "optimizer step " << adamw_.steps_taken() << " (loss " << result.loss << ", gradient norm "
               << result.grad_norm << ", lr " << result.lr << "; lower " << (critic ? "critic.optim.lr" : "optim.lr")
               << "): " << bad->describe());
  return result;
}

void PolicyUpdater::accumulate_micro_batch(const std::vector<PackedBatch>& micro_batches, size_t m,
                                           const ForwardOptions& options, const MicroLossFn& loss_fn,
                                           ParameterStore& into, const Transformer::GradsReadyFn& ready,
                                           UpdateResult& result) {
  // LoRA dropout: the base with this step's adapters beside it, their inputs masked by this micro-batch's draws.
  LoraDropout dropout;
  if (dropped_) {
    dropout = {static_cast<float>(lora_.adapters->config().dropout),
               lora_dropout_key(lora_.dropout_seed, adamw_.steps_taken(), static_cast<int64_t>(m))};
    dropped_->set_dropout(dropout);
  }
  const ParameterStore& weights = dropped_ ? lora_.base->weights() : work_params();
  ForwardOptions forward_options = options;
  if (dropped_) forward_options.adapters = &*dropped_;
  model_.forward(context_, weights, micro_batches[m], forward_options, acts_);
  const size_t n = static_cast<size_t>(acts_.num_tokens);
  LossOutput out = loss_fn(m, loss_inputs());
  if (model_.config().value_head) {
    RLCPP_CHECK(out.dvalue.size() == n, "PolicyUpdater::step: the critic's loss for micro-batch "
                                            << m << " returned " << out.dvalue.size() << " dvalue entries for " << n
                                            << " tokens");
    model_.backward_values(context_, work_params(), acts_, out.dvalue.data(), into, ready);
  } else {
    RLCPP_CHECK(out.dlogp.size() == n, "PolicyUpdater::step: the loss for micro-batch "
                                           << m << " returned " << out.dlogp.size() << " dlogp entries for " << n
                                           << " tokens");
    RLCPP_CHECK(out.dentropy.empty() || out.dentropy.size() == n,
                "PolicyUpdater::step: the loss for micro-batch " << m << " returned " << out.dentropy.size()
                                                                 << " dentropy entries for " << n << " tokens");
    const float* dentropy = out.dentropy.empty() ? nullptr : out.dentropy.data();
    if (lora_.enabled()) {
      LoraGradients grads(*lora_.adapters, into, dropout);
      model_.backward_frozen(context_, weights, acts_, out.dlogp.data(), dentropy, grads);
    } else
      model_.backward(context_, work_params(), acts_, out.dlogp.data(), dentropy, into, ready);
  }
  result.loss += out.loss;
  result.metrics.merge(out.metrics);
  result.tokens += micro_batches[m].num_tokens();
}

void PolicyUpdater::check_some_step_applied(const std::string& what) const {
  RLCPP_CHECK(steps_asked_ == 0 || bad_total_ < steps_asked_,
              what << ": all " << steps_asked_ << " optimizer steps had a non-finite loss or gradient norm and were "
                   << "skipped: the weights were never updated (lower optim.lr or the loss's scale, e.g. "
                   << "algorithm.dpo.beta / dpo.beta, or check the data)");
}

std::map<std::string, double> step_metrics(const UpdateResult& result, const std::string& prefix) {
  std::map<std::string, double> out = result.metrics.values(prefix);
  out[prefix + "grad_norm"] = result.grad_norm;
  out[prefix + "lr"] = result.lr;
  if (result.allreduce_wait_s) out[prefix + "allreduce_wait_s"] = *result.allreduce_wait_s;
  return out;
}

}  // namespace rlcpp
