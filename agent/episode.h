// A multi-turn episode as the trainer will see it: token in, token out. The prompt's tokens, then every later token
// exactly as it entered the engine's sequence, each marked with its source (sampled by the model, or appended by
// the environment), the log-prob and policy version of each sampled token, and where each assistant turn lies.
// Nothing is decoded and re-tokenized on the way to the trainer (agent/retokenize.h is the lab's contrast).
// The loss mask follows the sources: model tokens are trained on, environment tokens only attended.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/environment.h"
#include "core/config.h"
#include "reward/task.h"

namespace rlcpp {

enum class TokenSource : uint8_t { kModel = 0, kEnvironment = 1 };

struct Episode {
  // Who it is: its task item, its place in the draw's groups and its sampling key.
  Problem problem;
  int64_t group = 0;         // the draw's task item it belongs to (a GRPO group: sample_index 0 .. G-1)
  int64_t sample_index = 0;
  uint64_t seed = 0;         // sampling seed of every turn (kept when it runs on into a later draw)
  int64_t first_step = 0;    // the step whose draw started it

  // What happened, token by token (and the texts the environment wrote, for display and the retokenize lab).
  std::string prompt_text;                 // the environment's first observation
  std::vector<std::string> observation_texts;  // each later observation's text
  std::vector<uint8_t> observation_tool;   // per observation: 1 when it answered tool calls
  std::vector<int32_t> prompt;         // the first observation's tokens (BOS, a chat's system turn and tools...)
  std::vector<int32_t> tokens;         // every token after the prompt
  std::vector<TokenSource> sources;    // per token
  std::vector<float> logprobs;         // per token: the sampled token's (0 for the environment's)
  std::vector<int64_t> versions;       // per token: the policy version that sampled it (-1 for the environment's)
  std::vector<std::pair<int64_t, int64_t>> turn_spans;  // each assistant turn's [begin, end) in tokens
  std::vector<uint8_t> turn_ended;     // per turn: 1 when the model ended it (EOS or a stop token), 0 when cut

  // The outcome.
  double reward = 0;   // the return: the sum of the environment's rewards
  bool done = false;   // the environment ended it
  bool truncated = false;  // a limit ended it (end_reason)
  std::string end_reason;  // "done", "max_turns", "max_tokens", "context", "env_timeout", "env_error"
  std::string failure;     // an environment's error or timeout, as reported
  std::optional<bool> success;
  int64_t tool_calls = 0, tool_errors = 0;
  int64_t env_tokens = 0;  // tokens appended by the environment
  double env_seconds = 0;  // wall time of its environment's calls
  int64_t prefilled_tokens = 0, recomputed_tokens = 0;  // the engine's, over its turns

  // The environment holding its state while it runs, and its tools (not saved: a resumed episode replays its
  // turns).
  std::shared_ptr<Environment> env;
  std::vector<ToolSpec> tools;

  bool finished() const { return done || truncated; }
  int64_t turns() const { return static_cast<int64_t>(turn_spans.size()); }
  int64_t length() const { return static_cast<int64_t>(prompt.size() + tokens.size()); }
  // 1 for model tokens, 0 for the environment's: the loss mask over `tokens`.
  std::vector<float> loss_mask() const;
  // Appends sampled or appended tokens with their records.
  // A turn's sampled tokens; `ended`: the model ended it.
  void add_model_tokens(const std::vector<int32_t>& ids, const std::vector<float>& logps, int64_t version,
                        bool ended);
  // An observation's tokens, and its text.
  void add_environment_tokens(const std::vector<int32_t>& ids, const std::string& text = "", bool tool = false);
};

// An episode as JSON (exact: ids, floats and versions round-trip) and back; `where` names it in errors. The
// environment is not saved.
Json episode_to_json(const Episode& e);
Episode episode_from_json(const Json& j, const std::string& where);

}  // namespace rlcpp
