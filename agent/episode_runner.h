// Runs episodes: the environment's turns against the engine's sessions, token in, token out (agent/README.md).
// Each round the engine takes one turn of every running episode, batched (rollout/session.h: the K/V of the
// history is kept, only the observation is prefilled); then every environment steps on its turn (timed apart:
// the env phase) and its observation's tokens are appended to the episode and the session. An episode ends when
// its environment says done, or is truncated by agent.max_turns, agent.max_tokens or the context, or fails when its
// environment fails or misses agent.call_timeout_s: the run goes on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "agent/agent_config.h"
#include "agent/episode.h"
#include "agent/turn_protocol.h"

namespace rlcpp {

// One turn to run: until EOS, a stop token, max_new_tokens or the context; draws keyed by the session's prompt id
// and sample index, the turn's seed and the position.
struct TurnAsk {
  int64_t session = 0;
  int64_t max_new_tokens = 1;
  uint64_t seed = 0;
};

struct TurnReply {
  std::vector<int32_t> tokens;  // sampled, the one that ended the turn included
  std::vector<float> logprobs;
  bool ended = false;           // EOS or a stop token (not a length limit)
  int64_t policy_version = 0;
  int64_t prefilled_tokens = 0, recomputed_tokens = 0;
};

// What the runner needs of an engine: the sessions of rollout/session.h (loop/ adapts the in-process engine and the
// worker processes to it).
class TurnEngine {
 public:
  virtual ~TurnEngine() = default;
  virtual int64_t open(const std::vector<int32_t>& prompt, uint64_t prompt_id, int64_t sample_index) = 0;
  virtual void append(int64_t session, const std::vector<int32_t>& tokens) = 0;
  // One turn of each; replies in the order asked. `stop_tokens` end a turn besides EOS.
  virtual std::vector<TurnReply> run_turns(const std::vector<TurnAsk>& asks,
                                           const std::vector<int64_t>& stop_tokens) = 0;
  virtual void close(int64_t session) = 0;
  // The longest sequence a session may hold (prompt and every turn).
  virtual int64_t context() const = 0;
};

// An episode's environment, made when it starts (or replays).
using EnvFactory = std::function<std::shared_ptr<Environment>(const Episode&)>;

struct RunnerTotals {
  double env_seconds = 0;     // the environments' calls (the step's env phase)
  double engine_seconds = 0;  // the engine's turns
  int64_t rounds = 0;
};

// Runs every unfinished episode in `episodes` until it finishes or (agent.turns_per_draw > 0) has taken that many
// turns in this call. A fresh episode (no prompt yet) is reset first; sessions of fresh episodes given one after
// another with the same task item share their prompt's prefill. An episode carried over from an earlier call (it
// has its environment) reopens its session with its whole history. `env_threads` > 1 steps the environments of a
// round side by side (remote environments).
RunnerTotals run_episodes(const std::vector<Episode*>& episodes, TurnEngine& engine, const EnvFactory& make_env,
                          const TurnProtocol& protocol, const AgentConfig& config, int64_t env_threads = 1);

// Brings a saved, unfinished episode's environment back by replaying its turns (reset, then each turn's step),
// checking that each step appends the tokens the episode recorded; errors name the episode (an environment that
// does not replay the same cannot be resumed).
void replay_episode(Episode& episode, const EnvFactory& make_env, const TurnProtocol& protocol);

// The key the environment server tells an episode apart by: "STEP-GROUP-SAMPLE-ID".
std::string episode_key(const Episode& episode);

}  // namespace rlcpp
