#include "agent/retokenize.h"

#include "core/error.h"

namespace rlcpp {

Retokenized retokenize(const Episode& e, const HfTokenizer& tok, const TurnProtocol& protocol,
                       const std::string& system, bool enable_thinking) {
  RLCPP_CHECK(tok.chat_template() && tok.chat_template()->supports_tools(),
              "config key 'agent.tokenization': \"retokenize\" re-renders the conversation with the chat template, "
              "which " << tok.describe() << " lacks (it needs Qwen3's)");
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system, {}});
  messages.push_back({"user", e.prompt_text, {}});
  for (size_t k = 0; k < e.turn_spans.size(); ++k) {
    const auto [begin, end] = e.turn_spans[k];
    const AssistantTurn turn =
        protocol.parse({e.tokens.begin() + begin, e.tokens.begin() + end}, e.turn_ended[k] != 0, e.tools);
    ChatMessage m{"assistant", turn.text, {}};
    for (const ToolCall& c : turn.tool_calls) m.tool_calls.push_back({c.name, template_tojson(c.arguments)});
    messages.push_back(std::move(m));
    if (k < e.observation_texts.size())
      messages.push_back({e.observation_tool[k] ? "tool" : "user", e.observation_texts[k], {}});
  }
  std::vector<std::string> tools;
  for (const ToolSpec& t : e.tools) {
    OrderedJson f, wrapped;
    f["name"] = t.name;
    f["description"] = t.description;
    f["parameters"] = t.parameters;
    wrapped["type"] = "function";
    wrapped["function"] = f;
    tools.push_back(template_tojson(wrapped));
  }
  const RenderedChat chat = tok.chat_template()->render(messages, /*add_generation_prompt=*/false, enable_thinking,
                                                        tools);
  // Cut the text where the mask changes: after each assistant header, after its <|im_end|>. Those cuts sit next to
  // special tokens, where BPE splits anyway.
  const std::string header = "<|im_start|>assistant\n";
  std::vector<std::pair<size_t, bool>> cuts;  // (offset, the segment from here is trained)
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const auto [b, end] = chat.spans[i];
    cuts.push_back({b + header.size(), true});
    cuts.push_back({end - 1, false});  // the newline after <|im_end|> is not the assistant's
  }
  Retokenized out;
  const size_t first = cuts.empty() ? chat.text.size() : cuts.front().first;
  out.prompt = tok.encode(chat.text.substr(0, first));
  for (size_t c = 0; c < cuts.size(); ++c) {
    const size_t from = cuts[c].first, to = c + 1 < cuts.size() ? cuts[c + 1].first : chat.text.size();
    for (int32_t id : tok.encode(chat.text.substr(from, to - from))) {
      out.response.push_back(id);
      out.mask.push_back(cuts[c].second ? 1.0f : 0.0f);
    }
  }
  std::vector<float> sampled;
  for (size_t t = 0; t < e.tokens.size(); ++t)
    if (e.sources[t] == TokenSource::kModel) sampled.push_back(e.logprobs[t]);
  size_t j = 0;
  for (float m : out.mask) out.rollout_logp.push_back(m > 0 && j < sampled.size() ? sampled[j++] : 0.0f);
  out.differs = out.prompt != e.prompt || out.response != e.tokens;
  return out;
}

}  // namespace rlcpp
