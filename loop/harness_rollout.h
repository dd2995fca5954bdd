// Harness mode (agent.env "http", README "Agent harnesses"): a step's episodes played by the user's own agent
// harness, any program that speaks the OpenAI API. For each draw rlcpp serves the rollout engine (the in-process,
// colocated one) on a loopback port, runs the harness's command with OPENAI_BASE_URL set and the draw's episodes on
// its stdin (one JSON line each: "session", "item", "episode", "group_size", "prompt", "answer", "meta", "step"),
// and reads one line per episode back on its stdout: {"session", "reward"} (and optionally "success",
// "tool_calls", "tool_errors"). Each request carrying "X-Session-Id: SESSION" is a turn of that episode's session
// (rollout/serve_sessions.h): the engine keeps its tokens and K/V between turns, samples with the run's
// parameters under the episode's key (so the episodes are the same whatever the harness's concurrency), and
// records every token; the trainer trains on those records, token in, token out, the appended tokens masked out
// of the loss. The server lives for the draw only: the weights do not change while it serves.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/episode.h"
#include "agent/turn_protocol.h"
#include "loop/train_config.h"
#include "rollout/engine.h"
#include "rollout/serve_sessions.h"
#include "tokenizer/tokenizer.h"

namespace rlcpp {

struct HarnessDraw {
  RolloutStats stats;          // the server's engine steps
  double wall_s = 0;           // the harness's run
  double env_s = 0;            // of which the engine was not stepping (the harness's own work)
  int64_t dropped_groups = 0;  // task items left out: one of their episodes was never played
  int64_t requests = 0;        // session turns served
};

// How a chat session's new messages become tokens (rollout/serve_sessions.h): tool replies (role "tool", as
// Qwen3's template puts them, one user turn of <tool_response> blocks) or one user message, written by `protocol`
// (its observation tokens); null for a protocol without chat turns (w1).
ServeSessions::ChatTail harness_chat_tail(const TurnProtocol& protocol);

// Plays `episodes` (fresh, their problem, group, sample_index and first_step set; whole groups in order) through
// config.agent.harness on `engine` at `sampling` (the run's, its seed the draw's); fills each episode from its
// session's record and the harness's reward, and removes the groups the harness left unplayed. Throws naming
// agent.harness when the harness fails, times out or writes a bad line.
HarnessDraw play_with_harness(std::vector<Episode>& episodes, Engine& engine, const Tokenizer& tokenizer,
                              const TurnProtocol& protocol, const TrainConfig& config, const SamplingParams& sampling);

}  // namespace rlcpp
