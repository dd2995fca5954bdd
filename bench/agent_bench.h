// `rlcpp bench agent`: what keeping an episode's K/V between turns saves (issue 34, rollout/session.h). Episodes of
// T turns (T = 1, 4, 16 by default): a prompt, then T turns of sampled tokens with an observation appended between
// them. Kept: the engine's sessions (each turn prefills only the observation and the token the turn before
// sampled). Re-prefilled: each turn a stateless call that prefills the episode's whole history again, as a
// chat-completions server does. Reports prefilled tokens per episode and episode wall time for both, and the
// ratio.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlcpp::bench {

struct AgentBenchOptions {
  std::string preset = "tiny";           // the model's shapes (random weights): tiny (W1), qwen05b (W2), ...
  std::vector<int64_t> turns = {1, 4, 16};
  int64_t episodes = 16;                 // run side by side (a batch of sessions)
  int64_t prompt_len = 16;
  int64_t turn_tokens = 8;               // sampled per turn
  int64_t observation_len = 8;           // appended after each turn but the last
  int iters = 3;                         // timed repeats of each shape (the median is reported)
};

// Prints the table and returns 0.
int run_agent_bench(const AgentBenchOptions& options);

}  // namespace rlcpp::bench
