#include "loop/consistency_probe.h"

#include "core/error.h"
#include "loop/rollout_samples.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

ProbeResult run_consistency_probe(const ExecContext& exec, RolloutBackend& rollout, const Transformer& rollout_model,
                                  const ParameterStore& params, const Task& task, const Tokenizer& tokenizer,
                                  int64_t max_new_tokens, const ProbeConfig& config, int64_t version,
                                  const Transformer* trainer_model, Device engine_device,
                                  UnmergedRollout unmerged) {
  SamplingParams sampling;
  sampling.temperature = 1.0f;
  sampling.max_new_tokens = max_new_tokens;
  sampling.seed = config.seed;
  const Request request = make_rollout_request(task.eval_set(config.prompts), tokenizer, 1, sampling);
  const RolloutResult result = rollout.generate(request);
  check_sample_versions(result.samples, version);
  const std::vector<RolloutSample> batch = to_rollout_samples(request, result);
  std::vector<std::vector<float>> engine_logp;
  for (const RolloutSample& s : batch) engine_logp.push_back(s.rollout_logp);
  ProbeResult out;
  if (unmerged.adapters) {
    const UnmergedLora adapters(*unmerged.adapters);
    out.engine = logprob_mismatch(
        engine_logp, compute_response_logp(exec, rollout_model, *unmerged.base, batch, 64, 1.0f, {}, &adapters));
  } else {
    out.engine = logprob_mismatch(engine_logp, compute_response_logp(exec, rollout_model, params, batch, 64, 1.0f));
  }
  const bool invariant = rollout_model.numerics().batch_invariant && exec.runs_on(engine_device);
  const double bound = invariant ? config.max_abs_dlogp : config.max_abs_dlogp_blas;
  RLCPP_CHECK(out.engine.max_abs_dlogp <= bound,
              "consistency probe after sync to version "
                  << version << ": max |logp engine - logp trainer (" << rollout_model.numerics().describe()
                  << ")| = " << out.engine.max_abs_dlogp << " (mean |dp| " << out.engine.mean_abs_dp << ", k3 "
                  << out.engine.k3 << ") exceeds probe." << (invariant ? "max_abs_dlogp" : "max_abs_dlogp_blas")
                  << " = " << bound << "; the rollout engine is not sampling with the trainer's weights");
  if (trainer_model && (trainer_model != &rollout_model || unmerged.adapters)) {
    out.trainer = logprob_mismatch(engine_logp, compute_response_logp(exec, *trainer_model, params, batch, 64, 1.0f));
    std::vector<size_t> all(batch.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    if (!rollout_model.numerics().same_forward(trainer_model->numerics()))
      out.where = compare_forward(exec, rollout_model, params, *trainer_model, params, pack_rollout(batch, all).batch,
                                  1.0f, config.layer_threshold);
  }
  return out;
}

}  // namespace rlcpp
