// The inverse of the chat template's tool calls (tokenizer/chat_template.h): Qwen3's
//   <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
// blocks read back out of an assistant's text. One parser for every reader: the agent's chat turn protocol
// (agent/chat_protocol.cpp) and `rlcpp serve`'s "tool_calls" (rollout/serve_response.cpp).
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp {

// JSON that keeps its keys in the order written: a tool's schema and a call's arguments are rendered into the
// model's text (a chat template's `tojson`) in that order.
using OrderedJson = nlohmann::ordered_json;

inline constexpr const char* kToolCallOpen = "<tool_call>";
inline constexpr const char* kToolCallClose = "</tool_call>";

struct ParsedToolCall {
  std::string name;
  // An object as written (arguments written as a JSON string are parsed when they can be).
  OrderedJson arguments = OrderedJson::object();
};

struct ToolCallText {
  std::vector<ParsedToolCall> calls;  // the well-formed blocks, in the order written
  // The text outside the well-formed blocks, ASCII whitespace trimmed at both ends. A malformed block (not JSON,
  // not {"name": string, "arguments": ...}, or a <tool_call> never closed) stays in it as written.
  std::string text;
  std::string error;  // the first malformed block's problem ("" when none)
};

ToolCallText parse_tool_calls(const std::string& text);

}  // namespace rlcpp
