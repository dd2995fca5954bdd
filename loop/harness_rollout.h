// Harness mode (agent.env "http", README "Agent harnesses"): a step's episodes played by the user's own agent
// harness, any program that speaks the OpenAI API. For each draw rlcpp serves the rollout engine (any placement:
// the turns run on its turn engine, loop/session_turn_loop.h) on a loopback port, runs the harness's command with OPENAI_BASE_URL set and the draw's episodes on
// its stdin (one JSON line each: "session", "item", "episode", "group_size", "prompt", "answer", "meta", "step"),
// and reads one line per episode back on its stdout: {"session", "reward"} (and optionally "success",
// "tool_calls", "tool_errors"). Each request carrying "X-Session-Id: SESSION" is a turn of that episode's session
// (rollout/serve_sessions.h): the engine keeps its tokens and K/V between turns, samples with the run's
// parameters under the episode's key (so the episodes are the same whatever the harness's concurrency), and
// records every token; the trainer trains on those records, token in, token out, the appended tokens masked out
// of the loss. The server lives for the draw only: the weights do not change while it serves.
//
// Episodes that span weight syncs (agent.turns_per_draw = N, agent.tokens_per_draw = T): one harness and one
// server for the whole run (HarnessRun). Each draw sends the harness its new episodes (the same lines) and lets
// every session run at most N turns and sample at most T tokens. A session's next request past N waits, its client
// blocked, while the trainer updates and the weights are synced (the server has no engine then), and runs in the
// next draw under the new version ("finish": a turn ends under the version that began it). A turn that reaches T
// is kept, its request open, and goes on in the next draw under the new version ("keep"). Every token records the
// version that sampled it; a carried session is opened again on the next draw's engine with its history (K/V of an
// older version is never reused). A draw ends when each of its episodes has its reward line or a turn waiting; a
// group whose episodes all ended is the step's. Which tokens each version samples is fixed by N and T, never by
// timing. A draw whose step writes a checkpoint (or is the run's last) lets every episode run to its end, so no
// harness episode is in flight in a checkpoint and a resumed run goes on as the uninterrupted one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/episode.h"
#include "agent/turn_protocol.h"
#include "loop/engine_turns.h"
#include "loop/train_config.h"
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

// An episode's end_reason when the harness wrote its reward without a turn of it (one harness for the run): its
// task item is left out of the step (agent/harness_dropped_items), as a harness a draw's unplayed ones are.
inline constexpr const char* kUnplayed = "unplayed";

// How a chat session's new messages become tokens (rollout/serve_sessions.h): tool replies (role "tool", as
// Qwen3's template puts them, one user turn of <tool_response> blocks) or one user message, written by `protocol`
// (its observation tokens); null for a protocol without chat turns (w1).
ServeSessions::ChatTail harness_chat_tail(const TurnProtocol& protocol);

// Plays `episodes` (fresh, their problem, group, sample_index and first_step set; whole groups in order) through
// config.agent.harness on `engine` (the placement's turn engine: in-process or workers) at `sampling` (the run's,
// its seed the draw's); fills each episode from its session's record and the harness's reward, and removes the
// groups the harness left unplayed. `vocab_size`: the model's (token-id prompts are checked against it). Throws
// naming agent.harness when the harness fails, times out or writes a bad line.
HarnessDraw play_with_harness(std::vector<Episode>& episodes, RolloutTurnEngine& engine, const Tokenizer& tokenizer,
                              const TurnProtocol& protocol, const TrainConfig& config, const SamplingParams& sampling,
                              int64_t vocab_size);

// The harness and server of a run whose episodes span weight syncs (agent.turns_per_draw or tokens_per_draw).
class HarnessRun {
 public:
  // `tokenizer`, `protocol` and `config` must outlive it; `sampling`: the run's (each episode samples under its own
  // seed); `context` and `vocab_size`: the served model's.
  HarnessRun(const Tokenizer& tokenizer, const TurnProtocol& protocol, const TrainConfig& config,
             const SamplingParams& sampling, int64_t context, int64_t vocab_size);
  ~HarnessRun();  // the harness's input ends; it is given a few seconds to exit, then killed
  HarnessRun(const HarnessRun&) = delete;
  HarnessRun& operator=(const HarnessRun&) = delete;

  // One draw on `engine` (the placement's turn engine for it): `episodes` are those carried (an ended one waits for
  // its group and is left as it is; one still running goes on, its session opened on `engine` again with its
  // history) and new ones (their problem, group, sample_index, seed and first_step set). Each running episode
  // plays up to agent.turns_per_draw turns and agent.tokens_per_draw tokens, or to its end with `to_the_end`; those
  // that end are filled from their
  // records and rewards, the others stay running. On return no turn runs and `engine` holds none of the sessions
  // (the weights may change before the next draw). Throws naming agent.harness when the harness exits, writes a
  // bad line or leaves the draw unended for agent.harness_timeout_s.
  HarnessDraw play(std::vector<Episode>& episodes, RolloutTurnEngine& engine, bool to_the_end);

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
  const TrainConfig& config_;
  std::set<std::string> sent_;           // sessions the harness was given
  std::set<std::string> ended_;          // ... whose episodes have ended (their late lines are ignored)
  std::map<std::string, Json> rewards_;  // reward lines of sessions not yet ended
  int64_t lines_read_ = 0;
};

}  // namespace rlcpp
