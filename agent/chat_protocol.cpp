// The chat turn protocol (agent/turn_protocol.h): Qwen3's chat template's tool calling, written as the template
// writes it, so the tokens an episode appends are those its conversation renders to.
#include "agent/turn_protocol.h"
#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tool_calls.h"

namespace rlcpp {

namespace {

class ChatProtocol final : public TurnProtocol {
 public:
  ChatProtocol(const HfTokenizer& tok, bool enable_thinking, const std::string& system)
      : tok_(tok), template_(*tok.chat_template()), thinking_(enable_thinking), system_(system) {
    const std::optional<int32_t> im_end = tok.bpe().token_id("<|im_end|>");
    RLCPP_CHECK(im_end.has_value(), "agent: " << tok.describe() << " has no <|im_end|> token");
    im_end_ = *im_end;
  }
  std::string name() const override { return "chat"; }

  std::vector<int32_t> prompt_tokens(const std::string& text, const std::vector<ToolSpec>& tools) const override {
    std::vector<ChatMessage> messages;
    if (!system_.empty()) messages.push_back({"system", system_, {}});
    messages.push_back({"user", text, {}});
    return tok_.encode(template_.render(messages, /*add_generation_prompt=*/true, thinking_, tools_json(tools)).text);
  }

  std::vector<int64_t> stop_tokens() const override { return {im_end_}; }

  AssistantTurn parse(const std::vector<int32_t>& turn, bool ended, const std::vector<ToolSpec>&) const override {
    std::vector<int32_t> ids = turn;
    if (!ids.empty() && ids.back() == im_end_) ids.pop_back();
    ToolCallText read = parse_tool_calls(tok_.decode(ids));
    AssistantTurn out;
    out.ended = ended;
    out.text = std::move(read.text);
    out.tool_calls = std::move(read.calls);
    out.parse_error = std::move(read.error);
    return out;
  }

  std::vector<int32_t> observation_tokens(const std::vector<int32_t>& turn, const EnvStep& step) const override {
    std::string text;
    if (turn.empty() || turn.back() != im_end_) text += "<|im_end|>";  // a turn the limit cut is closed
    text += "\n<|im_start|>user\n";
    text += step.tool_output ? "<tool_response>\n" + step.observation + "\n</tool_response>" : step.observation;
    text += "<|im_end|>\n<|im_start|>assistant\n";
    if (!thinking_) text += "<think>\n\n</think>\n\n";
    return tok_.encode(text);
  }

  std::string display(const std::vector<int32_t>& tokens) const override {
    for (int32_t id : tokens)
      if (id < 0 || id >= tok_.bpe().vocab_size()) return tok_.decode(tokens);  // ids past the tokenizer's
    return tok_.bpe().decode(tokens, /*skip_special=*/false);
  }

  std::vector<int32_t> render_turn(const AssistantTurn& turn, const std::vector<ToolSpec>&) const override {
    std::string text = turn.text;
    for (size_t k = 0; k < turn.tool_calls.size(); ++k) {
      if ((k == 0 && !turn.text.empty()) || k > 0) text += "\n";
      text += "<tool_call>\n{\"name\": \"" + turn.tool_calls[k].name +
              "\", \"arguments\": " + template_tojson(turn.tool_calls[k].arguments) + "}\n</tool_call>";
    }
    std::vector<int32_t> ids = tok_.encode(text);
    ids.push_back(im_end_);
    return ids;
  }

  static std::vector<std::string> tools_json(const std::vector<ToolSpec>& tools) {
    std::vector<std::string> out;
    for (const ToolSpec& t : tools) {
      OrderedJson f;
      f["name"] = t.name;
      f["description"] = t.description;
      f["parameters"] = t.parameters;
      OrderedJson wrapped;
      wrapped["type"] = "function";
      wrapped["function"] = f;
      out.push_back(template_tojson(wrapped));
    }
    return out;
  }

 private:
  const HfTokenizer& tok_;
  const ChatTemplate& template_;
  bool thinking_;
  std::string system_;
  int32_t im_end_ = 0;
};

}  // namespace

std::unique_ptr<TurnProtocol> make_chat_protocol(const Tokenizer& tokenizer, bool enable_thinking,
                                                 const std::string& system) {
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer);
  RLCPP_CHECK(hf != nullptr && hf->chat_template() && hf->chat_template()->supports_tools(),
              "agent: " << tokenizer.describe() << " has no chat template that writes tool calls: episodes need "
                        << "the character tokenizer (the w1 protocol) or a tokenizer.json whose "
                        << "tokenizer_config.json holds Qwen3's chat template");
  return std::make_unique<ChatProtocol>(*hf, enable_thinking, system);
}

}  // namespace rlcpp
