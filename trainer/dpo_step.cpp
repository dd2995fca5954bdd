#include "trainer/dpo_step.h"

#include "core/error.h"
#include "trainer/dpo_loss.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

namespace {

// Pair i becomes samples 2i (chosen) and 2i + 1 (rejected).
std::vector<RolloutSample> pair_samples(std::span<const PreferencePair> pairs) {
  std::vector<RolloutSample> samples(2 * pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    samples[2 * i].prompt = samples[2 * i + 1].prompt = pairs[i].prompt;
    samples[2 * i].response = pairs[i].chosen;
    samples[2 * i + 1].response = pairs[i].rejected;
  }
  return samples;
}

std::vector<PackedRollout> pair_micro_batches(const std::vector<RolloutSample>& samples, int64_t micro_batch_pairs) {
  RLCPP_CHECK(micro_batch_pairs >= 1, "DPO: micro_batch_pairs must be >= 1, got " << micro_batch_pairs);
  std::vector<size_t> all(samples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return pack_micro_batches(samples, all, 2 * micro_batch_pairs);
}

std::vector<DpoPair> micro_pairs(const PackedRollout& p) {
  std::vector<DpoPair> pairs;
  for (int64_t k = 0; k + 1 < static_cast<int64_t>(p.samples.size()); k += 2) pairs.push_back({k, k + 1});
  return pairs;
}

std::vector<float> forward_logp(const ExecContext& exec, const Transformer& model, const ParameterStore& params,
                                const PackedBatch& batch, Activations& acts) {
  ParameterStore copy;  // host weights (the reference) copied to a device context
  ForwardOptions options;
  options.keep_activations = false;  // scoring: no backward follows
  model.forward(exec, params_on(exec, params, copy), batch, options, acts);
  Tensor host;
  const float* logp = host_tensor(exec, acts.logp, host).data<float>();
  return std::vector<float>(logp, logp + acts.num_tokens);
}

LossOutput micro_loss(const PackedRollout& p, std::span<const float> logp, std::span<const float> ref_logp,
                      const DpoConfig& cfg, double global_pairs) {
  const std::vector<DpoPair> pairs = micro_pairs(p);
  return dpo_loss({p.cu, logp, ref_logp, p.mask, pairs}, cfg, global_pairs);
}

}  // namespace

std::vector<PreferencePair> pairs_from_rollout(const std::vector<RolloutSample>& samples,
                                               std::span<const float> rewards, std::span<const int64_t> group_ids) {
  RLCPP_CHECK(rewards.size() == samples.size(), "pairs_from_rollout: " << rewards.size() << " rewards for "
                                                                       << samples.size() << " samples");
  std::vector<PreferencePair> out;
  for (const DpoPair& p : pair_by_reward(rewards, group_ids)) {
    const RolloutSample& chosen = samples[p.chosen];
    const RolloutSample& rejected = samples[p.rejected];
    RLCPP_CHECK(chosen.prompt == rejected.prompt, "pairs_from_rollout: samples " << p.chosen << " and " << p.rejected
                                                                                 << " share a group id but not "
                                                                                 << "their prompt");
    out.push_back({chosen.prompt, chosen.response, rejected.response});
  }
  return out;
}

UpdateResult dpo_step(PolicyUpdater& policy, const ParameterStore* reference, std::span<const PreferencePair> pairs,
                      const DpoConfig& cfg, int64_t micro_batch_pairs, int64_t total_steps) {
  RLCPP_CHECK(!pairs.empty(), "dpo_step: no preference pairs");
  RLCPP_CHECK(reference != nullptr || !cfg.uses_reference(), "dpo_step: loss_type " << cfg.loss_type
                                                                 << " needs the reference policy");
  const std::vector<RolloutSample> samples = pair_samples(pairs);
  const std::vector<PackedRollout> micro = pair_micro_batches(samples, micro_batch_pairs);
  std::vector<std::vector<float>> ref_logp;
  std::vector<PackedBatch> batches;
  Activations ref_acts;
  for (const PackedRollout& p : micro) {
    ref_logp.push_back(cfg.uses_reference()
                           ? forward_logp(policy.context(), policy.model(), *reference, p.batch, ref_acts)
                           : std::vector<float>{});
    batches.push_back(p.batch);
  }
  const double global_pairs = static_cast<double>(pairs.size());
  auto loss = [&](size_t m, const Activations& acts) {
    return micro_loss(micro[m], {acts.logp.data<float>(), static_cast<size_t>(acts.num_tokens)}, ref_logp[m], cfg,
                      global_pairs);
  };
  return policy.step(batches, ForwardOptions{}, loss, total_steps);
}

LossMetrics dpo_evaluate(const ExecContext& exec, const Transformer& model, const ParameterStore& params,
                         const ParameterStore* reference, std::span<const PreferencePair> pairs, const DpoConfig& cfg,
                         int64_t micro_batch_pairs) {
  RLCPP_CHECK(!pairs.empty(), "dpo_evaluate: no preference pairs");
  RLCPP_CHECK(reference != nullptr || !cfg.uses_reference(), "dpo_evaluate: loss_type " << cfg.loss_type
                                                                     << " needs the reference policy");
  const std::vector<RolloutSample> samples = pair_samples(pairs);
  LossMetrics metrics;
  Activations acts;
  for (const PackedRollout& p : pair_micro_batches(samples, micro_batch_pairs)) {
    const std::vector<float> ref_logp =
        cfg.uses_reference() ? forward_logp(exec, model, *reference, p.batch, acts) : std::vector<float>{};
    const std::vector<float> logp = forward_logp(exec, model, params, p.batch, acts);
    metrics.merge(micro_loss(p, logp, ref_logp, cfg, static_cast<double>(pairs.size())).metrics);
  }
  return metrics;
}

}  // namespace rlcpp
