#include "agent/tools.h"

#include "core/error.h"
#include "reward/expression_parser.h"

namespace rlcpp {

namespace {

bool has_json_type(const OrderedJson& value, const std::string& type) {
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  return true;  // a type this check does not know: the tool's function judges
}

// "" when `arguments` fit the schema, else what is wrong.
std::string argument_error(const ToolSpec& spec, const OrderedJson& arguments) {
  if (!arguments.is_object()) return "arguments must be a JSON object, got " + arguments.dump().substr(0, 80);
  const OrderedJson& params = spec.parameters;
  const OrderedJson properties =
      params.is_object() && params.contains("properties") ? params["properties"] : OrderedJson::object();
  if (params.is_object() && params.contains("required") && params["required"].is_array())
    for (const OrderedJson& name : params["required"])
      if (name.is_string() && !arguments.contains(name.get<std::string>()))
        return "missing argument '" + name.get<std::string>() + "'";
  for (const auto& [name, value] : arguments.items()) {
    if (!properties.contains(name)) return "unknown argument '" + name + "'";
    const OrderedJson& declared = properties[name];
    if (declared.is_object() && declared.contains("type") && declared["type"].is_string() &&
        !has_json_type(value, declared["type"].get<std::string>()))
      return "argument '" + name + "' must be " + declared["type"].get<std::string>() + ", got " +
             value.dump().substr(0, 80);
  }
  return "";
}

}  // namespace

void ToolBox::add(const ToolSpec& spec, Function function) {
  RLCPP_CHECK(!spec.name.empty(), "tool box: a tool needs a name");
  for (const Tool& t : tools_) RLCPP_CHECK(t.spec.name != spec.name, "tool box: tool '" << spec.name << "' twice");
  tools_.push_back({spec, std::move(function)});
}

std::vector<ToolSpec> ToolBox::specs() const {
  std::vector<ToolSpec> out;
  for (const Tool& t : tools_) out.push_back(t.spec);
  return out;
}

ToolResult ToolBox::call(const ToolCall& call) const {
  const Tool* tool = nullptr;
  for (const Tool& t : tools_)
    if (t.spec.name == call.name) tool = &t;
  if (tool == nullptr) {
    std::string names;
    for (const Tool& t : tools_) names += (names.empty() ? "" : ", ") + t.spec.name;
    return {"error: unknown tool '" + call.name + "' (tools: " + names + ")", true};
  }
  if (const std::string bad = argument_error(tool->spec, call.arguments); !bad.empty())
    return {"error: " + call.name + ": " + bad, true};
  try {
    return {tool->function(call.arguments), false};
  } catch (const std::exception& e) {
    return {"error: " + call.name + ": " + e.what(), true};
  }
}

EnvStep ToolBox::run(const AssistantTurn& turn) const {
  EnvStep step;
  step.tool_output = true;
  std::string text;
  if (!turn.parse_error.empty()) {
    text = "error: " + turn.parse_error;
    step.error = true;
    ++step.tool_calls;
    ++step.tool_errors;
  }
  for (const ToolCall& c : turn.tool_calls) {
    const ToolResult r = call(c);
    text += (text.empty() ? "" : "\n") + r.text;
    step.error = step.error || r.error;
    ++step.tool_calls;
    step.tool_errors += r.error ? 1 : 0;
  }
  step.observation = text;
  return step;
}

ToolSpec calculator_spec() {
  ToolSpec spec;
  spec.name = "calculator";
  spec.description = "Evaluate an arithmetic expression of integers with + - * / and parentheses, exactly.";
  spec.parameters = OrderedJson::parse(
      R"({"type": "object", "properties": {"expression": {"type": "string", "description": "e.g. 123*456"}},
          "required": ["expression"]})");
  return spec;
}

std::string calculator(const OrderedJson& arguments) {
  const std::string expression = arguments.at("expression").get<std::string>();
  const ExpressionResult r = evaluate_expression(expression);
  RLCPP_CHECK(r.status == ExpressionStatus::kOk, r.error);
  if (r.value.is_integer()) return std::to_string(r.value.num);
  return std::to_string(r.value.num) + "/" + std::to_string(r.value.den);
}

}  // namespace rlcpp
