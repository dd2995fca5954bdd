#include "tokenizer/tool_calls.h"

#include <cstring>

namespace rlcpp {

namespace {

std::string trim_space(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b);
}

// The call in one block's body, or the reason it is not one.
std::string read_call(const std::string& body, ParsedToolCall& call) {
  OrderedJson j;
  try {
    j = OrderedJson::parse(body);
  } catch (const OrderedJson::exception&) {
    return "the tool call is not JSON: " + trim_space(body).substr(0, 80);
  }
  if (!(j.is_object() && j.contains("name") && j["name"].is_string() && j.contains("arguments")))
    return "a tool call must be {\"name\": string, \"arguments\": object}, got " + trim_space(body).substr(0, 80);
  call.name = j["name"].get<std::string>();
  call.arguments = j["arguments"];
  if (call.arguments.is_string()) {  // some models write the arguments as a JSON string
    try {
      call.arguments = OrderedJson::parse(call.arguments.get<std::string>());
    } catch (const OrderedJson::exception&) {
    }
  }
  return "";
}

}  // namespace

ToolCallText parse_tool_calls(const std::string& text) {
  const size_t open_len = std::strlen(kToolCallOpen), close_len = std::strlen(kToolCallClose);
  ToolCallText out;
  std::string rest;
  size_t at = 0;
  while (true) {
    const size_t open = text.find(kToolCallOpen, at);
    if (open == std::string::npos) {
      rest += text.substr(at);
      break;
    }
    rest += text.substr(at, open - at);
    const size_t close = text.find(kToolCallClose, open + open_len);
    if (close == std::string::npos) {
      if (out.error.empty()) out.error = std::string("a ") + kToolCallOpen + " without its " + kToolCallClose;
      rest += text.substr(open);
      break;
    }
    at = close + close_len;
    ParsedToolCall call;
    const std::string error = read_call(text.substr(open + open_len, close - open - open_len), call);
    if (error.empty()) {
      out.calls.push_back(std::move(call));
    } else {
      if (out.error.empty()) out.error = error;
      rest += text.substr(open, at - open);
    }
  }
  out.text = trim_space(rest);
  return out;
}

}  // namespace rlcpp
