#include "trainer/rollout_batch.h"

#include <numeric>

#include "core/error.h"

namespace rlcpp {

namespace {

void check_response_array(const std::vector<float>& a, size_t index, const RolloutSample& s, const char* name) {
  RLCPP_CHECK(a.size() == s.response.size(), "rollout sample " << index << ": " << name << " has " << a.size()
                                                               << " entries, expected one per response token ("
                                                               << s.response.size() << ")");
}

std::vector<std::vector<float>> run_forward(const ExecContext& exec, const Transformer& model,
                                            const ParameterStore& params, const std::vector<RolloutSample>& samples,
                                            int64_t micro_batch_size, float temperature,
                                            const Truncation& truncation = {},
                                            const LinearAdapters* adapters = nullptr) {
  std::vector<size_t> all(samples.size());
  std::iota(all.begin(), all.end(), size_t{0});
  std::vector<std::vector<float>> out(samples.size());
  Activations acts;
  ForwardOptions options;
  options.temperature = temperature;
  options.truncation = truncation;
  options.keep_activations = false;  // scoring: no backward follows
  options.adapters = adapters;
  // On a device context: host weights copied there for these passes (the reference, a teacher, the policy's
  // host copy), the per-position results copied back.
  ParameterStore copy;
  const ParameterStore& on_exec = params_on(exec, params, copy);
  Tensor host;
  for (const PackedRollout& p : pack_micro_batches(samples, all, micro_batch_size)) {
    model.forward(exec, on_exec, p.batch, options, acts);
    const Tensor& per_position = model.config().value_head ? acts.values : acts.logp;
    const Tensor& values = host_tensor(exec, per_position, host);
    auto per_sample = p.gather({values.data<float>(), static_cast<size_t>(acts.num_tokens)});
    for (size_t k = 0; k < p.samples.size(); ++k) out[p.samples[k]] = std::move(per_sample[k]);
  }
  return out;
}

}  // namespace

LogprobScoring common_logprob_scoring(const std::vector<RolloutSample>& samples, const LogprobScoring& fallback) {
  if (samples.empty()) return fallback;
  const LogprobScoring& first = samples.front().scoring;
  for (size_t i = 1; i < samples.size(); ++i)
    RLCPP_CHECK(samples[i].scoring == first,
                "rollout batch: sample 0 was drawn to be scored at " << first.describe() << " but sample " << i
                    << " at " << samples[i].scoring.describe()
                    << "; one batch is scored by forwards at one temperature and truncation, so its samples must "
                       "all come from one sampling setting");
  return first;
}

std::vector<float> PackedRollout::scatter(const std::vector<RolloutSample>& all, RolloutField field,
                                          const char* name) const {
  std::vector<float> out(batch.tokens.size(), 0.0f);
  for (size_t k = 0; k < samples.size(); ++k) {
    const RolloutSample& s = all[samples[k]];
    const std::vector<float>& a = s.*field;
    check_response_array(a, samples[k], s, name);
    for (size_t j = 0; j < a.size(); ++j) out[response_begin[k] + j] = a[j];
  }
  return out;
}

std::vector<std::vector<float>> PackedRollout::gather(std::span<const float> values) const {
  RLCPP_CHECK(values.size() == batch.tokens.size(), "PackedRollout::gather: " << values.size()
                                                                              << " values for "
                                                                              << batch.tokens.size() << " positions");
  std::vector<std::vector<float>> out(samples.size());
  for (size_t k = 0; k < samples.size(); ++k)
    out[k].assign(values.begin() + response_begin[k], values.begin() + response_begin[k] + response_size[k]);
  return out;
}

PackedRollout pack_rollout(const std::vector<RolloutSample>& all, std::span<const size_t> indices) {
  PackedRollout p;
  std::vector<std::vector<int32_t>> sequences;
  std::vector<int32_t> score_from;
  for (size_t index : indices) {
    RLCPP_CHECK(index < all.size(), "pack_rollout: sample index " << index << " outside the batch of " << all.size());
    const RolloutSample& s = all[index];
    RLCPP_CHECK(!s.prompt.empty(), "rollout sample " << index << ": the prompt is empty (it needs at least BOS)");
    if (!s.mask.empty()) check_response_array(s.mask, index, s, "mask");
    std::vector<int32_t> seq = s.prompt;
    seq.insert(seq.end(), s.response.begin(), s.response.end());
    sequences.push_back(std::move(seq));
    score_from.push_back(static_cast<int32_t>(s.prompt.size()) - 1);
    p.samples.push_back(index);
  }
  p.batch = PackedBatch::from_sequences(sequences, score_from);
  p.cu.assign(p.batch.cu_seqlens.begin(), p.batch.cu_seqlens.end());
  p.mask.assign(p.batch.tokens.size(), 0.0f);
  for (size_t k = 0; k < p.samples.size(); ++k) {
    const RolloutSample& s = all[p.samples[k]];
    const int64_t start = p.cu[k] + static_cast<int64_t>(s.prompt.size()) - 1;
    p.response_begin.push_back(start);
    p.response_size.push_back(static_cast<int64_t>(s.response.size()));
    for (size_t j = 0; j < s.response.size(); ++j) p.mask[start + j] = s.mask.empty() ? 1.0f : s.mask[j];
  }
  return p;
}

std::vector<PackedRollout> pack_micro_batches(const std::vector<RolloutSample>& all, std::span<const size_t> indices,
                                              int64_t micro_batch_size) {
  RLCPP_CHECK(micro_batch_size >= 1, "micro_batch_size must be >= 1, got " << micro_batch_size);
  std::vector<PackedRollout> out;
  for (size_t begin = 0; begin < indices.size(); begin += static_cast<size_t>(micro_batch_size)) {
    const size_t n = std::min(indices.size() - begin, static_cast<size_t>(micro_batch_size));
    out.push_back(pack_rollout(all, indices.subspan(begin, n)));
  }
  return out;
}

std::vector<std::vector<float>> compute_response_logp(const ExecContext& exec, const Transformer& model,
                                                      const ParameterStore& params,
                                                      const std::vector<RolloutSample>& samples,
                                                      int64_t micro_batch_size, float temperature,
                                                      const Truncation& truncation,
                                                      const LinearAdapters* adapters) {
  RLCPP_CHECK(!model.config().value_head, "compute_response_logp: the model is a critic (value head)");
  return run_forward(exec, model, params, samples, micro_batch_size, temperature, truncation, adapters);
}

std::vector<std::vector<float>> compute_response_values(const ExecContext& exec, const Transformer& critic,
                                                        const ParameterStore& params,
                                                        const std::vector<RolloutSample>& samples,
                                                        int64_t micro_batch_size) {
  RLCPP_CHECK(critic.config().value_head, "compute_response_values: the model has no value head");
  return run_forward(exec, critic, params, samples, micro_batch_size, 1.0f);
}

}  // namespace rlcpp
