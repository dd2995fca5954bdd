// Requests and results on the wire (core/wire.h framing): the worker protocol's payloads.
//   generate  header {request_id, n, sampling{...}}; arrays prompt_offsets i64 (P+1), prompt_tokens i32,
//             prompt_ids i64 (P)
//   result    header {request_id, stats{...}}; arrays sample_offsets i64 (S+1), tokens i32, logprobs f32,
//             prompt_index i64 (S), sample_index i64 (S), finish_reason i32 (S), policy_version i64 (S, 2),
//             num_preemptions i64 (S), times f64 (S, 3): scheduled, first token, finished, scoring_temperature
//             f32 (S), scoring_top_k i64 (S), scoring_top_p f32 (S): the distribution the log-probs are of
// Decoding checks every count, offset and id before use and throws WireError naming the field.
#pragma once

#include <cstdint>

#include "core/wire.h"
#include "model/model_config.h"
#include "rollout/request.h"

namespace rlcpp {

// Bounds on what one request may ask of a worker, checked before any allocation it implies.
struct RequestLimits {
  int64_t max_prompts = int64_t{1} << 16;
  int64_t max_n = 4096;
  int64_t max_sequences = int64_t{1} << 20;  // prompts * n
  int64_t max_prompt_tokens = int64_t{1} << 26;
};

WireMessage encode_generate_request(const Request& request, uint64_t request_id);
// Validates against the limits and the model (ids in the vocabulary, room for a new token, sampling ranges).
Request decode_generate_request(const WireMessage& message, const ModelConfig& model, const RequestLimits& limits,
                                uint64_t& request_id);

WireMessage encode_generate_result(const RolloutResult& result, uint64_t request_id);
RolloutResult decode_generate_result(const WireMessage& message, uint64_t& request_id);

// The request_id of a header, or -1 when it has none (for error replies to messages that failed early).
int64_t header_request_id(const Json& header);

// For the payloads' decoders (throwing WireError naming the field): header integer `key` in [lo, hi]; the
// header's request_id; `offsets` (count + 1) into a flat array of `total` elements, from 0, never decreasing.
int64_t read_header_int(const Json& header, const char* key, int64_t lo, int64_t hi);
uint64_t read_request_id(const Json& header);
void check_wire_offsets(const std::vector<int64_t>& offsets, int64_t total, const char* name);

// What a worker's results carry: the header's rollout stats, and runs of sampled tokens (`offsets_name`, count + 1,
// into the arrays "tokens" and "logprobs"), checked.
RolloutStats read_result_stats(const WireMessage& message);
struct SampledRuns {
  std::vector<int64_t> offsets;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int64_t count() const { return static_cast<int64_t>(offsets.size()) - 1; }
};
SampledRuns read_sampled_runs(const WireMessage& message, const char* offsets_name);
// A finish reason's code, checked; `what` names its sample or turn.
FinishReason read_finish_reason(int32_t code, const std::string& what);

}  // namespace rlcpp
