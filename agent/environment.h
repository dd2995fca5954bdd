// The Environment of a multi-turn episode (gym's and TRL's environment_factory's shape: reset and step, nothing
// more). reset takes a task item and returns the first observation's text (the prompt); step takes the assistant's
// turn, as the turn protocol parsed it from the sampled tokens (agent/turn_protocol.h), and returns the next
// observation, a reward, and whether the episode is over. Turns, tokens and loss masks are the episode runner's
// business (agent/episode_runner.h), never the environment's: it sees text and tool calls, and answers in text.
//
// A tool call that cannot be parsed, names an unknown tool, carries bad arguments or makes the tool throw becomes
// an observation the model sees (EnvStep::error), counted in agent/tool_errors, never a crash (agent/tools.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "reward/task.h"
#include "tokenizer/tool_calls.h"

namespace rlcpp {

// A function the model may call: name, what it does, and its arguments as a JSON schema (listed in a chat
// model's system turn, as its chat template does).
struct ToolSpec {
  std::string name;
  std::string description;
  OrderedJson parameters = OrderedJson::object();  // {"type": "object", "properties": {...}, "required": [...]}
};

// A call the model made: the chat template's parser (tokenizer/tool_calls.h) reads Qwen3's, w1's protocol its own.
using ToolCall = ParsedToolCall;

// The assistant's turn as the environment sees it.
struct AssistantTurn {
  std::string text;                  // the turn's text without its tool calls and end markers
  std::vector<ToolCall> tool_calls;  // in the order written
  std::string parse_error;           // a tool call the protocol could not read ("" = none)
  bool ended = true;                 // false: cut by the turn's token limit or the context, not ended by the model
};

struct EnvStep {
  std::string observation;      // text the model reads before its next turn ("" once done)
  bool tool_output = false;     // the observation answers tool calls (a chat model reads it as the tool's reply)
  bool error = false;           // the observation reports an error (a bad call, an unknown tool, a failing tool)
  double reward = 0;            // added to the episode's return
  bool done = false;
  std::optional<bool> success;  // the episode's outcome, when the environment knows it
  int64_t tool_calls = 0;       // calls made in this step
  int64_t tool_errors = 0;      // of which failed (parse error, unknown tool, bad arguments, exception)
};

class Environment {
 public:
  virtual ~Environment() = default;
  // Starts an episode on `item`; returns the prompt's text.
  virtual std::string reset(const Problem& item) = 0;
  virtual EnvStep step(const AssistantTurn& turn) = 0;
  // The tools it offers (none: it reads the assistant's text only).
  virtual std::vector<ToolSpec> tools() const { return {}; }
};

}  // namespace rlcpp
