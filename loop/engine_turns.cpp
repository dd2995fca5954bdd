#include "loop/engine_turns.h"

namespace rlcpp {

TurnReply turn_reply(const TurnResult& r) {
  TurnReply out;
  out.tokens = r.tokens;
  out.logprobs = r.logprobs;
  out.ended = r.finish_reason != FinishReason::kLength;
  out.policy_version = r.policy_version;
  out.prefilled_tokens = r.prefilled_tokens;
  out.recomputed_tokens = r.recomputed_tokens;
  return out;
}

int64_t EngineTurns::open(const std::vector<int32_t>& prompt, uint64_t prompt_id, int64_t sample_index) {
  return engine_.open_session({prompt, prompt_id, sample_index});
}

void EngineTurns::append(int64_t session, const std::vector<int32_t>& tokens) { engine_.append(session, tokens); }

std::vector<TurnReply> EngineTurns::run_turns(const std::vector<TurnAsk>& asks,
                                              const std::vector<int64_t>& stop_tokens) {
  std::vector<TurnRequest> turns;
  for (const TurnAsk& a : asks) turns.push_back({a.session, turn_sampling(base_, a.max_new_tokens, a.seed, stop_tokens)});
  RolloutStats stats;
  const std::vector<TurnResult> results = engine_.run_turns(turns, {}, &stats);
  if (first_) {
    stats_ = stats;
    first_ = false;
  } else {
    stats_.then(stats);
  }
  std::vector<TurnReply> out;
  for (const TurnResult& r : results) out.push_back(turn_reply(r));
  return out;
}

}  // namespace rlcpp
