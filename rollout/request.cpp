#include "rollout/request.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/temperature.h"

namespace rlcpp {

void SamplingParams::validate(const std::string& where, int64_t vocab_size) const {
  check_temperature(temperature, where, /*zero_is_greedy=*/true);
  RLCPP_CHECK(top_k >= 0, where << ": top_k must be >= 0 (0 = off), got " << top_k);
  RLCPP_CHECK(std::isfinite(top_p) && top_p > 0 && top_p <= 1, where << ": top_p must be in (0, 1], got " << top_p);
  RLCPP_CHECK(std::isfinite(min_p) && min_p >= 0 && min_p <= 1, where << ": min_p must be in [0, 1], got " << min_p);
  RLCPP_CHECK(min_p == 0 || logprob_space == "full",
              where << ": min_p " << min_p << " with logprob_space \"sampled\": the trainer replays top-k and top-p "
                                             "only; use min_p with \"full\"");
  RLCPP_CHECK(logprob_space == "full" || logprob_space == "sampled",
              where << ": logprob_space \"" << logprob_space << "\" is not one of full, sampled");
  RLCPP_CHECK(max_new_tokens >= 1, where << ": max_new_tokens must be >= 1, got " << max_new_tokens);
  for (size_t i = 0; i < stop_tokens.size(); ++i)
    RLCPP_CHECK(stop_tokens[i] >= 0 && stop_tokens[i] < vocab_size,
                where << ": stop_tokens[" << i << "] = " << stop_tokens[i] << " outside the vocabulary [0, "
                      << vocab_size << ")");
}

void Request::validate(const ModelConfig& model) const {
  RLCPP_CHECK(n >= 1, "request: n (samples per prompt) must be >= 1, got " << n);
  RLCPP_CHECK(prompt_ids.empty() || prompt_ids.size() == prompts.size(),
              "request: " << prompt_ids.size() << " prompt ids for " << prompts.size() << " prompts");
  sampling.validate("request sampling", model.vocab_size);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& prompt = prompts[p];
    RLCPP_CHECK(!prompt.empty(), "request: prompt " << p << " is empty");
    RLCPP_CHECK(static_cast<int64_t>(prompt.size()) < model.max_position_embeddings,
                "request: prompt " << p << " has " << prompt.size() << " tokens; the context of "
                                   << model.max_position_embeddings << " leaves no room for a new token");
    for (size_t t = 0; t < prompt.size(); ++t)
      RLCPP_CHECK(prompt[t] >= 0 && prompt[t] < model.vocab_size,
                  "request: prompt " << p << " token " << t << " is " << prompt[t] << ", outside the vocabulary [0, "
                                     << model.vocab_size << ")");
  }
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos: return "eos";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
  }
  return "?";
}

FinishReason finish_reason_from_name(const std::string& name) {
  for (FinishReason r : {FinishReason::kEos, FinishReason::kLength, FinishReason::kStop})
    if (name == finish_reason_name(r)) return r;
  RLCPP_FAIL("unknown finish reason '" << name << "' (expected eos, length or stop)");
}

Json RolloutStats::to_json() const {
  return Json{{"sequences", sequences},
              {"generated_tokens", generated_tokens},
              {"prefill_tokens", prefill_tokens},
              {"prefill_tokens_saved", prefill_tokens_saved},
              {"prefix_cache_queried_tokens", prefix_cache_queried_tokens},
              {"prefix_cache_hit_tokens", prefix_cache_hit_tokens},
              {"recomputed_tokens", recomputed_tokens},
              {"evictions", evictions},
              {"steps", steps},
              {"preemptions", preemptions},
              {"max_batch_sequences", max_batch_sequences},
              {"kv_bytes_per_token", kv_bytes_per_token},
              {"block_size", block_size},
              {"num_blocks", num_blocks},
              {"peak_blocks_in_use", peak_blocks_in_use},
              {"peak_blocks_unshared", peak_blocks_unshared},
              {"bytes_saved_by_sharing", bytes_saved_by_sharing()},
              {"wall_s", wall_s},
              {"forward_s", forward_s},
              {"sample_s", sample_s},
              {"schedule_s", schedule_s}};
}

RolloutStats RolloutStats::from_json(const Json& j) {
  RLCPP_CHECK(j.is_object(), "rollout stats: expected an object, got " << j.dump().substr(0, 80));
  RolloutStats s;
  auto integer = [&](const char* key, int64_t& field) {
    auto it = j.find(key);
    RLCPP_CHECK(it != j.end() && it->is_number_integer(), "rollout stats: '" << key << "' must be an integer");
    field = it->get<int64_t>();
  };
  auto number = [&](const char* key, double& field) {
    auto it = j.find(key);
    RLCPP_CHECK(it != j.end() && it->is_number(), "rollout stats: '" << key << "' must be a number");
    field = it->get<double>();
  };
  integer("sequences", s.sequences);
  integer("generated_tokens", s.generated_tokens);
  integer("prefill_tokens", s.prefill_tokens);
  integer("prefill_tokens_saved", s.prefill_tokens_saved);
  // Absent from the stats of older checkpoints' pending rollouts: 0 there.
  if (j.contains("prefix_cache_queried_tokens")) integer("prefix_cache_queried_tokens", s.prefix_cache_queried_tokens);
  if (j.contains("prefix_cache_hit_tokens")) integer("prefix_cache_hit_tokens", s.prefix_cache_hit_tokens);
  if (j.contains("recomputed_tokens")) integer("recomputed_tokens", s.recomputed_tokens);
  if (j.contains("evictions")) integer("evictions", s.evictions);
  integer("steps", s.steps);
  integer("preemptions", s.preemptions);
  integer("max_batch_sequences", s.max_batch_sequences);
  integer("kv_bytes_per_token", s.kv_bytes_per_token);
  integer("block_size", s.block_size);
  integer("num_blocks", s.num_blocks);
  integer("peak_blocks_in_use", s.peak_blocks_in_use);
  integer("peak_blocks_unshared", s.peak_blocks_unshared);
  number("wall_s", s.wall_s);
  number("forward_s", s.forward_s);
  number("sample_s", s.sample_s);
  number("schedule_s", s.schedule_s);
  return s;
}

namespace {

// Counters always add up. Runs one after another (`sequential`: the same cache, later) add their steps and
// times and share their blocks (the peak is the larger); runs side by side (separate caches) add their blocks
// and overlap in time (the longer counts).
void combine(RolloutStats& s, const RolloutStats& o, bool sequential) {
  s.sequences += o.sequences;
  s.generated_tokens += o.generated_tokens;
  s.prefill_tokens += o.prefill_tokens;
  s.prefill_tokens_saved += o.prefill_tokens_saved;
  s.prefix_cache_queried_tokens += o.prefix_cache_queried_tokens;
  s.prefix_cache_hit_tokens += o.prefix_cache_hit_tokens;
  s.preemptions += o.preemptions;
  s.recomputed_tokens += o.recomputed_tokens;
  s.evictions += o.evictions;
  const auto in_time = [sequential](auto& a, auto b) { a = sequential ? a + b : std::max(a, b); };
  const auto in_space = [sequential](auto& a, auto b) { a = sequential ? std::max(a, b) : a + b; };
  in_time(s.steps, o.steps);
  in_time(s.wall_s, o.wall_s);
  in_time(s.forward_s, o.forward_s);
  in_time(s.sample_s, o.sample_s);
  in_time(s.schedule_s, o.schedule_s);
  in_space(s.num_blocks, o.num_blocks);
  in_space(s.peak_blocks_in_use, o.peak_blocks_in_use);
  in_space(s.peak_blocks_unshared, o.peak_blocks_unshared);
  s.max_batch_sequences = std::max(s.max_batch_sequences, o.max_batch_sequences);
  s.kv_bytes_per_token = std::max(s.kv_bytes_per_token, o.kv_bytes_per_token);
  s.block_size = std::max(s.block_size, o.block_size);
}

}  // namespace

double RolloutStats::prefix_cache_hit_rate() const {
  return prefix_cache_queried_tokens > 0
             ? static_cast<double>(prefix_cache_hit_tokens) / static_cast<double>(prefix_cache_queried_tokens)
             : 0.0;
}

void RolloutStats::then(const RolloutStats& o) { combine(*this, o, /*sequential=*/true); }

void RolloutStats::merge(const RolloutStats& o) { combine(*this, o, /*sequential=*/false); }

}  // namespace rlcpp
