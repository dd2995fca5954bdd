// Session turns on the worker protocol (rollout/worker_service.h): multi-turn episodes (agent/) played on worker
// processes, each episode one of a worker's engine sessions (rollout/session.h), kept between calls with its K/V.
// One "turns" message carries everything the client has for one worker since its last call, applied in this order:
//   reset      close every session a client opened before (a new trainer: nothing of an earlier run stays)
//   closes     sessions ended
//   opens      new sessions: their prompt, prompt id and sample index (the sampling key)
//   appends    tokens of known origin (observations, or a session's whole history when it moves to this worker)
//   turns      one turn each: sampled with `sampling` (the run's), its own token limit and seed, `stop_tokens` added
// and is answered by "turns_result" with each turn's tokens, log-probs, finish reason, version and prefill counts,
// in the order asked, and the call's rollout stats.
//   turns         header {request_id, reset, sampling{...}, stop_tokens[]}; arrays closes i64, open_sessions i64,
//                 open_ids i64 (prompt id bits), open_sample_index i64, open_offsets i64 (O+1), open_tokens i32,
//                 append_sessions i64, append_offsets i64 (A+1), append_tokens i32, turn_sessions i64,
//                 turn_max_new_tokens i64, turn_seeds i64 (seed bits)
//   turns_result  header {request_id, stats{...}}; arrays offsets i64 (K+1), tokens i32, logprobs f32,
//                 finish_reason i32, policy_version i64, prefilled i64, recomputed i64 (K each)
// Decoding checks every count, offset, token id and limit before use and throws WireError naming the field.
#pragma once

#include <cstdint>
#include <vector>

#include "core/wire.h"
#include "model/model_config.h"
#include "rollout/engine.h"
#include "rollout/request_wire.h"
#include "rollout/session.h"

namespace rlcpp {

// The sampling of one turn: `base` (the run's temperature, top-k/p, log-prob space) with the turn's token limit
// and seed, EOS honoured, `stop_tokens` ending it besides base's own.
SamplingParams turn_sampling(const SamplingParams& base, int64_t max_new_tokens, uint64_t seed,
                             const std::vector<int64_t>& stop_tokens);

struct TurnsCall {
  struct Open {
    int64_t session = 0;  // the client's id for it
    SessionSpec spec;
  };
  struct Append {
    int64_t session = 0;
    std::vector<int32_t> tokens;
  };
  struct Turn {
    int64_t session = 0;
    int64_t max_new_tokens = 1;
    uint64_t seed = 0;
  };
  bool reset = false;
  SamplingParams sampling;
  std::vector<int64_t> stop_tokens;
  std::vector<int64_t> closes;
  std::vector<Open> opens;
  std::vector<Append> appends;
  std::vector<Turn> turns;
};

struct TurnsResult {
  std::vector<TurnResult> turns;  // in the order asked (TurnResult::session: the client's id)
  RolloutStats stats;
};

WireMessage encode_turns_request(const TurnsCall& call, uint64_t request_id);
// Validates against the limits (prompts and tokens) and the model (token ids, sampling ranges).
TurnsCall decode_turns_request(const WireMessage& message, const ModelConfig& model, const RequestLimits& limits,
                               uint64_t& request_id);
WireMessage encode_turns_result(const TurnsResult& result, uint64_t request_id);
TurnsResult decode_turns_result(const WireMessage& message, uint64_t& request_id);

}  // namespace rlcpp
