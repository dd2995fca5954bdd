// The rollout engine's sessions (rollout/session.h) as the episode runner's TurnEngine (agent/episode_runner.h):
// loop/ is where agent/ and rollout/ meet. Each turn samples with the run's sampling parameters (temperature,
// top-k/p, log-prob space), its own token limit, stop tokens and seed; the calls' counters add up in stats().
#pragma once

#include "agent/episode_runner.h"
#include "rollout/engine.h"
#include "rollout/turns_wire.h"

namespace rlcpp {

// The TurnEngine that a placement hands the episode runner, with the rollout counters of its turns.
class RolloutTurnEngine : public TurnEngine {
 public:
  virtual const RolloutStats& stats() const = 0;
};

class EngineTurns final : public RolloutTurnEngine {
 public:
  // `engine` must outlive it.
  EngineTurns(Engine& engine, const SamplingParams& base) : engine_(engine), base_(base) {}
  int64_t open(const std::vector<int32_t>& prompt, uint64_t prompt_id, int64_t sample_index) override;
  void append(int64_t session, const std::vector<int32_t>& tokens) override;
  std::vector<TurnReply> run_turns(const std::vector<TurnAsk>& asks, const std::vector<int64_t>& stop_tokens) override;
  void close(int64_t session) override { engine_.close_session(session); }
  int64_t context() const override { return engine_.model_config().max_position_embeddings; }
  const RolloutStats& stats() const override { return stats_; }

 private:
  Engine& engine_;
  SamplingParams base_;
  RolloutStats stats_;
  bool first_ = true;
};

// The runner's view of an engine's turn result.
TurnReply turn_reply(const TurnResult& result);

}  // namespace rlcpp
