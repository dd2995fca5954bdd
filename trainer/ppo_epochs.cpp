#include "trainer/ppo_epochs.h"

#include <numeric>

#include "core/error.h"
#include "trainer/policy_loss.h"
#include "trainer/value_loss.h"

namespace rlcpp {

void PpoEpochsConfig::validate(const std::string& where) const {
  RLCPP_CHECK(epochs >= 1, where << ".epochs: must be >= 1, got " << epochs);
  RLCPP_CHECK(mini_batch_size >= 0, where << ".mini_batch_size: must be >= 0 (0 = whole batch), got "
                                          << mini_batch_size);
  RLCPP_CHECK(micro_batch_size >= 1, where << ".micro_batch_size: must be >= 1, got " << micro_batch_size);
}

std::vector<std::vector<size_t>> mini_batch_plan(size_t num_samples, const PpoEpochsConfig& cfg, PhiloxStream& rng) {
  cfg.validate("ppo epochs");
  RLCPP_CHECK(num_samples > 0, "mini_batch_plan: the rollout batch is empty");
  const size_t mini = cfg.mini_batch_size > 0 ? static_cast<size_t>(cfg.mini_batch_size) : num_samples;
  std::vector<std::vector<size_t>> plan;
  std::vector<size_t> order(num_samples);
  for (int64_t e = 0; e < cfg.epochs; ++e) {
    std::iota(order.begin(), order.end(), size_t{0});
    if (cfg.shuffle)  // Fisher-Yates
      for (size_t i = num_samples - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    for (size_t begin = 0; begin < num_samples; begin += mini)
      plan.emplace_back(order.begin() + begin, order.begin() + std::min(num_samples, begin + mini));
  }
  return plan;
}

std::map<std::string, double> EpochsResult::metrics(const std::string& prefix) const {
  LossMetrics over_steps;
  for (const UpdateResult& r : steps) {
    for (const auto& [name, value] : r.metrics.values()) over_steps.add_mean(name, value, 1.0);
    over_steps.add_mean("grad_norm", r.grad_norm, 1.0);
    if (r.allreduce_wait_s) over_steps.add_sum("allreduce_wait_s", *r.allreduce_wait_s);  // the step's total
  }
  std::map<std::string, double> out = over_steps.values(prefix);
  if (!steps.empty()) out[prefix + "lr"] = steps.back().lr;
  out[prefix + "skipped_steps"] = static_cast<double>(skipped);
  return out;
}

namespace {

// Optional per-token inputs are used when any sample has them; scatter then requires them of every sample.
bool any_sample_has(const std::vector<RolloutSample>& samples, RolloutField field) {
  for (const RolloutSample& s : samples)
    if (!(s.*field).empty()) return true;
  return false;
}

std::vector<PackedBatch> model_batches(const std::vector<PackedRollout>& micro) {
  std::vector<PackedBatch> out;
  for (const PackedRollout& p : micro) out.push_back(p.batch);
  return out;
}

void record(EpochsResult& result, UpdateResult r) {
  result.skipped += r.skipped ? 1 : 0;
  result.steps.push_back(std::move(r));
}

}  // namespace

EpochsResult update_actor(PolicyUpdater& actor, const std::vector<RolloutSample>& samples,
                          const ActorUpdateOptions& options, const PpoEpochsConfig& cfg, PhiloxStream& rng) {
  RLCPP_CHECK(!actor.model().config().value_head, "update_actor: the model is a critic (value head)");
  options.loss.validate("policy_loss");
  const bool has_ref = any_sample_has(samples, &RolloutSample::ref_logp);
  const bool has_rollout = any_sample_has(samples, &RolloutSample::rollout_logp);
  ForwardOptions fwd;
  fwd.temperature = options.temperature;
  fwd.truncation = options.truncation;
  // The truncated distribution's entropy is not computed (AlgorithmConfig::validate refuses an entropy bonus).
  fwd.entropy = (options.entropy || options.loss.entropy_coef > 0) &&
                !options.truncation.active(actor.model().config().vocab_size);

  struct Inputs {  // one micro-batch's per-token inputs in the position layout
    std::vector<float> old_logp, advantages, ref_logp, rollout_logp;
  };
  EpochsResult result;
  for (const std::vector<size_t>& mini : mini_batch_plan(samples.size(), cfg, rng)) {
    const std::vector<PackedRollout> micro = pack_micro_batches(samples, mini, cfg.micro_batch_size);
    std::vector<Inputs> inputs;
    LossNormalizer norm;  // over the whole mini-batch: this optimizer step's global batch
    for (size_t m = 0; m < micro.size(); ++m) {
      const PackedRollout& p = micro[m];
      Inputs in;
      in.old_logp = p.scatter(samples, &RolloutSample::old_logp, "old_logp");
      in.advantages = p.scatter(samples, &RolloutSample::advantages, "advantages");
      if (has_ref) in.ref_logp = p.scatter(samples, &RolloutSample::ref_logp, "ref_logp");
      if (has_rollout) in.rollout_logp = p.scatter(samples, &RolloutSample::rollout_logp, "rollout_logp");
      inputs.push_back(std::move(in));
      const LossNormalizer part = policy_loss_normalizer(options.loss, p.cu, p.mask, options.max_response_length);
      if (m == 0) norm = part;
      else norm.merge(part);
    }
    auto loss = [&](size_t m, const Activations& acts) {
      const size_t n = static_cast<size_t>(acts.num_tokens);
      const Inputs& in = inputs[m];
      PolicyLossInputs pin;
      pin.cu = micro[m].cu;
      pin.logp = {acts.logp.data<float>(), n};
      pin.old_logp = in.old_logp;
      pin.advantages = in.advantages;
      pin.mask = micro[m].mask;
      if (has_ref) pin.ref_logp = std::span<const float>(in.ref_logp);
      if (fwd.entropy) pin.entropy = std::span<const float>(acts.entropy.data<float>(), n);
      if (has_rollout) pin.rollout_logp = std::span<const float>(in.rollout_logp);
      return policy_loss(pin, options.loss, norm);
    };
    record(result, actor.step(model_batches(micro), fwd, loss, options.total_steps));
  }
  actor.refresh_host_weights();
  return result;
}

EpochsResult update_critic(PolicyUpdater& critic, const std::vector<RolloutSample>& samples,
                           const CriticUpdateOptions& options, const PpoEpochsConfig& cfg, PhiloxStream& rng) {
  RLCPP_CHECK(critic.model().config().value_head, "update_critic: the model has no value head");
  const LossAgg agg = parse_loss_agg(options.agg, "ppo.value_agg");
  RLCPP_CHECK(agg != LossAgg::kSeqMeanTokenSumNorm,
              "ppo.value_agg: seq-mean-token-sum-norm is not supported for the value loss (it needs a length "
              "constant); use token-mean, seq-mean-token-sum or seq-mean-token-mean");

  struct Inputs {
    std::vector<float> old_values, returns;
  };
  EpochsResult result;
  for (const std::vector<size_t>& mini : mini_batch_plan(samples.size(), cfg, rng)) {
    const std::vector<PackedRollout> micro = pack_micro_batches(samples, mini, cfg.micro_batch_size);
    std::vector<Inputs> inputs;
    LossNormalizer norm;
    norm.agg = agg;
    for (const PackedRollout& p : micro) {
      inputs.push_back({p.scatter(samples, &RolloutSample::old_values, "old_values"),
                        p.scatter(samples, &RolloutSample::returns, "returns")});
      norm.merge(LossNormalizer::over_batch(agg, p.cu, p.mask));
    }
    auto loss = [&](size_t m, const Activations& acts) {
      const size_t n = static_cast<size_t>(acts.num_tokens);
      return value_loss({micro[m].cu, {acts.values.data<float>(), n}, inputs[m].old_values, inputs[m].returns,
                         micro[m].mask},
                        options.value_clip, norm);
    };
    record(result, critic.step(model_batches(micro), ForwardOptions{}, loss, options.total_steps));
  }
  critic.refresh_host_weights();
  return result;
}

}  // namespace rlcpp
