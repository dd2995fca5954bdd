#include "loop/consistency_probe.h"

#include "core/error.h"
#include "loop/rollout_samples.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

Mismatch run_consistency_probe(RolloutBackend& rollout, const Transformer& model, const ParameterStore& params,
                               const Task& task, const CharTokenizer& tokenizer, int64_t max_new_tokens,
                               const ProbeConfig& config, int64_t version) {
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
  const Mismatch m = logprob_mismatch(engine_logp, compute_response_logp(model, params, batch, 64, 1.0f));
  RLCPP_CHECK(m.max_abs_dlogp <= config.max_abs_dlogp,
              "consistency probe after sync to version "
                  << version << ": max |logp engine - logp trainer| = " << m.max_abs_dlogp << " (mean |dp| "
                  << m.mean_abs_dp << ", k3 " << m.k3 << ") exceeds probe.max_abs_dlogp = " << config.max_abs_dlogp
                  << "; the rollout engine is not sampling with the trainer's weights");
  return m;
}

}  // namespace rlcpp
