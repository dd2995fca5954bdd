// The w1 turn protocol (agent/turn_protocol.h): the character tokenizer's unused ids as call and observation
// markers.
#include <algorithm>

#include "agent/turn_protocol.h"
#include "core/error.h"

namespace rlcpp {

namespace {

// The argument a w1 call fills: the tool's first required property (else its first property).
std::string call_argument(const ToolSpec& tool) {
  const OrderedJson& p = tool.parameters;
  if (p.contains("required") && p["required"].is_array() && !p["required"].empty() && p["required"][0].is_string())
    return p["required"][0].get<std::string>();
  if (p.contains("properties") && p["properties"].is_object() && !p["properties"].empty())
    return p["properties"].begin().key();
  return "input";
}

class W1Protocol final : public TurnProtocol {
 public:
  explicit W1Protocol(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  std::string name() const override { return "w1"; }

  std::vector<int32_t> prompt_tokens(const std::string& text, const std::vector<ToolSpec>&) const override {
    return tok_.encode_prompt(text, Json());
  }

  std::vector<int64_t> stop_tokens() const override { return {kW1CallClose}; }

  AssistantTurn parse(const std::vector<int32_t>& turn, bool ended, const std::vector<ToolSpec>& tools) const override {
    AssistantTurn out;
    out.ended = ended;
    const auto open = std::find(turn.begin(), turn.end(), kW1CallOpen);
    out.text = tok_.decode(std::vector<int32_t>(turn.begin(), open));
    if (open == turn.end()) return out;
    const auto close = std::find(open + 1, turn.end(), kW1CallClose);
    if (close == turn.end()) {
      out.parse_error = "a tool call without its </call>";
      return out;
    }
    if (tools.empty()) {
      out.parse_error = "this environment has no tools";
      return out;
    }
    ToolCall call;
    call.name = tools.front().name;
    call.arguments[call_argument(tools.front())] = tok_.decode(std::vector<int32_t>(open + 1, close));
    out.tool_calls.push_back(std::move(call));
    return out;
  }

  std::vector<int32_t> observation_tokens(const std::vector<int32_t>&, const EnvStep& step) const override {
    std::vector<int32_t> out = {kW1ObsOpen};
    if (step.error) {
      out.push_back(kW1ObsError);
    } else {
      try {
        for (int32_t id : tok_.encode(step.observation)) out.push_back(id);
      } catch (const Error& e) {
        RLCPP_FAIL("agent: the environment's observation \"" << step.observation << "\" cannot be written in the w1 "
                                                             << "protocol: " << e.what());
      }
    }
    out.push_back(kW1ObsClose);
    return out;
  }

  std::string display(const std::vector<int32_t>& tokens) const override {
    std::string out;
    for (int32_t id : tokens) {
      switch (id) {
        case kW1CallOpen: out += "<call>"; break;
        case kW1CallClose: out += "</call>"; break;
        case kW1ObsOpen: out += "<obs>"; break;
        case kW1ObsClose: out += "</obs>"; break;
        case kW1ObsError: out += "<error>"; break;
        default: out += id == tok_.eos_id() ? std::string("<eos>") : tok_.decode({id});
      }
    }
    return out;
  }

  std::vector<int32_t> render_turn(const AssistantTurn& turn, const std::vector<ToolSpec>& tools) const override {
    std::vector<int32_t> out = tok_.encode(turn.text);
    if (turn.tool_calls.empty()) {
      out.push_back(tok_.eos_id());
      return out;
    }
    RLCPP_CHECK(turn.tool_calls.size() == 1 && !tools.empty(), "agent: the w1 protocol writes one call per turn");
    const OrderedJson& args = turn.tool_calls[0].arguments;
    const std::string key = call_argument(tools.front());
    RLCPP_CHECK(args.contains(key) && args[key].is_string(), "agent: a w1 call fills the string argument '" << key
                                                                                                          << "'");
    out.push_back(kW1CallOpen);
    for (int32_t id : tok_.encode(args[key].get<std::string>())) out.push_back(id);
    out.push_back(kW1CallClose);
    return out;
  }

 private:
  const Tokenizer& tok_;
};

}  // namespace

std::unique_ptr<TurnProtocol> make_w1_protocol(const Tokenizer& tokenizer) {
  return std::make_unique<W1Protocol>(tokenizer);
}

}  // namespace rlcpp
