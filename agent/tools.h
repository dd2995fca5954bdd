// Tools an environment offers and the one place their calls are checked and run: a ToolBox holds each tool's spec
// and function; call() turns every failure (an unknown tool, missing or mistyped arguments, the function
// throwing) into an error observation the model reads, never an exception out of the episode.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/environment.h"

namespace rlcpp {

struct ToolResult {
  std::string text;    // what the model reads
  bool error = false;  // the call failed; text says why
};

class ToolBox {
 public:
  using Function = std::function<std::string(const OrderedJson& arguments)>;  // throws on a bad call

  // `spec.parameters`' "required" properties must be present, and every given property of a declared "type"
  // (string, integer, number, boolean, object, array) must have it; others are refused as unknown.
  void add(const ToolSpec& spec, Function function);
  std::vector<ToolSpec> specs() const;
  ToolResult call(const ToolCall& call) const;
  // Runs every call of a turn into one step: the results joined by newlines, as tool output (a parse error of
  // the turn first, as an error), with the counts.
  EnvStep run(const AssistantTurn& turn) const;

 private:
  struct Tool {
    ToolSpec spec;
    Function function;
  };
  std::vector<Tool> tools_;
};

// The calculator of the calc task: {"expression": "123*456"} -> "56088" (integers, + - * / and parentheses, exact
// rationals: a fraction prints as "p/q", a negative value with its "-"); reward/expression_parser.h evaluates it.
ToolSpec calculator_spec();
std::string calculator(const OrderedJson& arguments);

}  // namespace rlcpp
