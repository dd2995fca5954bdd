// What a rollout is asked for and what it returns. A Request holds P prompts and a group size n; the engine
// returns P * n Samples, prompt-major (sample s of prompt p at index p * n + s), whoever computed them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/logprob_scoring.h"
#include "model/model_config.h"

namespace rlcpp {

struct SamplingParams {
  // 0 = greedy (argmax, lowest id on ties). The returned log-probs are under softmax(logits / T) over the
  // whole vocabulary, before top-k / top-p truncation (T = 1 for greedy), or with logprob_space "sampled" under
  // the truncated distribution the token was drawn from (kernels/truncation.h): the distribution the trainer
  // scores, so the importance ratio is exactly 1 on-policy.
  float temperature = 1.0f;  // 0, or finite and >= kMinTemperature = 1e-3 (kernels/temperature.h)
  int64_t top_k = 0;     // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;    // keep the smallest most-likely set with mass >= top_p; 1 = off
  // keep the tokens at least min_p times as likely as the most likely one (a cap on top_k); 0 = off
  float min_p = 0.0f;
  int64_t max_new_tokens = 16;
  std::vector<int64_t> stop_tokens;  // finish (reason "stop") after sampling any of these, besides EOS
  bool ignore_eos = false;           // keep going past EOS (fixed-length timing runs)
  uint64_t seed = 0;                 // Philox key of every draw
  std::string logprob_space = "full";  // "full" | "sampled" (see temperature)

  template <class V> void visit(V& v) {
    v("temperature", temperature, "sampling temperature: 0 = greedy, else >= 1e-3 (colder overflows fp32)");
    v("top_k", top_k, "keep the k most likely tokens (0 = off)");
    v("top_p", top_p, "nucleus sampling mass (1 = off)");
    v("min_p", min_p,
      "keep the tokens at least min_p times as likely as the most likely one (0 = off; not with "
      "logprob_space \"sampled\")");
    v("max_new_tokens", max_new_tokens, "response length limit (tokens)");
    v("stop_tokens", stop_tokens, "token ids that end a response, besides EOS");
    v("ignore_eos", ignore_eos, "do not stop at EOS (fixed-length benchmarks)");
    v("seed", seed, "sampling seed (Philox key)");
    v("logprob_space", logprob_space,
      "\"full\": log-probs under the whole tempered distribution; \"sampled\": under the top-k / top-p "
      "truncated one the token was drawn from (rlcpp train: set algorithm.logprob_space)");
  }

  // Throws naming the field when a value is out of range (`where` prefixes the message).
  void validate(const std::string& where, int64_t vocab_size) const;
  // The distribution the returned log-probs are of (kernels/logprob_scoring.h: greedy is scored at T = 1).
  LogprobScoring scoring() const { return logprob_scoring(temperature, top_k, top_p, logprob_space == "sampled"); }
};

struct Request {
  std::vector<std::vector<int32_t>> prompts;  // token ids, BOS included by the caller
  // One id per prompt: the Philox counter uses it, so a prompt's samples do not depend on where it sits in
  // the request or on which worker serves it. Empty = 0, 1, ..., P-1.
  std::vector<uint64_t> prompt_ids;
  int64_t n = 1;  // samples per prompt (the group)
  SamplingParams sampling;

  uint64_t prompt_id(size_t p) const { return prompt_ids.empty() ? p : prompt_ids[p]; }
  // Checks everything a model needs before any work: ids in the vocabulary, room for one new token.
  void validate(const ModelConfig& model) const;
};

enum class FinishReason { kEos, kLength, kStop };
const char* finish_reason_name(FinishReason reason);
FinishReason finish_reason_from_name(const std::string& name);  // throws on an unknown name

struct Sample {
  int64_t prompt_index = 0;  // into Request::prompts
  int64_t sample_index = 0;  // 0 .. n-1 within the group
  std::vector<int32_t> tokens;  // the response; includes the EOS or stop token that ended it
  std::vector<float> logprobs;  // log p(token) under `scoring`
  // The temperature and truncation the log-probs are of (SamplingParams::scoring of the request that drew it):
  // what the trainer scores the sample at.
  LogprobScoring scoring;
  FinishReason finish_reason = FinishReason::kLength;  // kLength also when the context is full
  int64_t policy_version = 0;       // weights that produced the first token
  int64_t last_policy_version = 0;  // weights that produced the last token (differs only across a swap)
  int64_t num_preemptions = 0;
  // Seconds since the request started: first scheduled, first token, finished.
  double scheduled_s = 0, first_token_s = 0, finished_s = 0;
};

// Counters of one generate call (summed over workers by the client).
struct RolloutStats {
  int64_t sequences = 0;
  int64_t generated_tokens = 0;
  int64_t prefill_tokens = 0;         // prompt (and recomputed) tokens run through the model
  // Prompt tokens not run through the model because their K/V was there: a group's siblings sharing its
  // prefill, and the prefix cache's hits.
  int64_t prefill_tokens_saved = 0;
  // The prefix cache (rollout/block_manager.h): context tokens of admitted groups looked up in it (once per
  // group), and of those the ones found; their ratio is the hit rate.
  int64_t prefix_cache_queried_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  // Of prefill_tokens, those whose K/V had been computed before: recomputation after a preemption, or after a
  // session's blocks were evicted or its K/V went stale with a weight swap (rollout/README.md "Sessions").
  int64_t recomputed_tokens = 0;
  int64_t evictions = 0;              // idle sessions whose blocks were taken for others
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t max_batch_sequences = 0;    // most sequences in one step
  // Memory: a token's K and V in every layer take kv_bytes_per_token bytes.
  int64_t kv_bytes_per_token = 0;
  int64_t block_size = 0;
  int64_t num_blocks = 0;
  int64_t peak_blocks_in_use = 0;
  // Most blocks the live sequences' block tables referenced in one step: what the same batch would hold
  // without sharing a group's prompt blocks. peak_blocks_unshared - peak_blocks_in_use is the saving.
  int64_t peak_blocks_unshared = 0;
  double wall_s = 0, forward_s = 0, sample_s = 0, schedule_s = 0;

  int64_t block_bytes() const { return block_size * kv_bytes_per_token; }
  int64_t bytes_saved_by_sharing() const { return (peak_blocks_unshared - peak_blocks_in_use) * block_bytes(); }
  // prefix_cache_hit_tokens / prefix_cache_queried_tokens, 0 when nothing was looked up.
  double prefix_cache_hit_rate() const;
  Json to_json() const;
  static RolloutStats from_json(const Json& j);  // throws naming a missing or mistyped key
  // Sums counters and takes the max of peaks and times (workers run in parallel).
  void merge(const RolloutStats& other);
  // `later` ran after this on the same cache (a worker's next chunk, a step's next draw): counters and times add
  // up, peaks and sizes take the max.
  void then(const RolloutStats& later);
};

struct RolloutResult {
  std::vector<Sample> samples;  // prompt-major, P * n
  RolloutStats stats;
};

}  // namespace rlcpp
