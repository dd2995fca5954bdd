// Chat conversations to prompt text, as a checkpoint's tokenizer_config.json "chat_template" renders them in
// `transformers`' apply_chat_template (tests/tokenizer_chat_template_test.cpp compares the two). rlcpp does not run
// Jinja: it recognises the template's family and renders that family's format, refusing templates it does not
// know rather than guessing:
//   ChatML (Qwen2, Qwen2.5, Qwen3): <|im_start|>ROLE\nCONTENT<|im_end|>\n per message; Qwen2.5's default system
//     message when the conversation has none; Qwen3's <think> handling of assistant turns after the last user
//     turn, and enable_thinking = false's empty think block after the generation prompt;
//   Llama-3: <|begin_of_text|> then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> per message
//     (content trimmed).
// Tools (Qwen3's template): the tools listed in the system turn, an assistant's tool calls as <tool_call> blocks and
// tool messages as <tool_response> blocks of a user turn, as its template writes them; other templates refuse
// them.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace rlcpp {

// A call an assistant message makes; `arguments` is the JSON text the template writes (`tojson` of the arguments,
// or the string it was given).
struct ChatToolCall {
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  std::string role;  // system, user, assistant, or tool (a tool's reply)
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant messages only
};

// A rendered conversation and where each message landed in it: message i is text[spans[i].first, spans[i].second)
// (a system message with tools: the whole system turn; an assistant message: from its header to its <|im_end|>
// and newline). The generation prompt, when added, follows the last span.
struct RenderedChat {
  std::string text;
  std::vector<std::pair<size_t, size_t>> spans;
};

// [{"role": ..., "content": ...}, ...] in OpenAI's chat shape: roles system, user, assistant and tool; an
// assistant's "tool_calls" ([{"type": "function", "function": {"name", "arguments"}}], its content then may be null);
// a tool message's "tool_call_id" (accepted, not rendered: Qwen3's template does not write it). Errors name `where`
// and the message.
std::vector<ChatMessage> chat_messages_from_json(const Json& messages, const std::string& where);

// Hugging Face's `tojson` filter of chat templates: json.dumps(value, ensure_ascii=False) with ", " and ": "
// separators, keys in the order given (nlohmann::ordered_json keeps them).
std::string template_tojson(const nlohmann::ordered_json& value);

// How a run formats its prompts (config key "chat"; `rlcpp eval` / `generate` --chat, --system, --no-thinking).
struct ChatOptions {
  bool enabled = false;  // each prompt becomes a user turn of the checkpoint's chat template
  std::string system;    // a system message before it ("" = none, or the template's default)
  bool enable_thinking = true;  // Qwen3: false puts an empty <think></think> after the generation prompt
  template <class V> void visit(V& v) {
    v("enabled", enabled,
      "format each prompt as a user turn of the tokenizer's chat template (tokenizer_config.json beside "
      "tokenizer.json), with the generation prompt");
    v("system", system, "system message before the user turn (\"\" = none, or the template's default)");
    v("enable_thinking", enable_thinking, "Qwen3 templates: false closes the think block at once");
  }
};

class ChatTemplate {
 public:
  enum class Family { kChatML, kLlama3 };
  // The template of `chat_template` text (tokenizer_config.json's), or an error naming `where` when its family
  // is not one of the above.
  static ChatTemplate recognise(const std::string& chat_template, const std::string& where);
  // tokenizer_config.json's template in `dir` (or beside a tokenizer.json path); none when it has none.
  static std::optional<ChatTemplate> of_tokenizer(const std::string& path);
  // The template of a tokenizer_config.json already read (`where`: its path); none when it has none.
  static std::optional<ChatTemplate> of_tokenizer_config(const Json& config, const std::string& where);

  // The prompt text; with add_generation_prompt the assistant's header follows, for the model to continue.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                    bool enable_thinking = true) const;
  // The same with `tools` (each tool's JSON text as the template's `tojson` writes it: {"type": "function",
  // "function": {...}}) listed in the system turn, and each message's span. Tools, tool calls and tool messages
  // need a template that renders them (supports_tools); errors name the message.
  RenderedChat render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, bool enable_thinking,
                      const std::vector<std::string>& tools = {}) const;
  // Qwen3's template: tools, <tool_call> and <tool_response>.
  bool supports_tools() const { return family_ == Family::kChatML && thinking_; }
  Family family() const { return family_; }

 private:
  Family family_ = Family::kChatML;
  bool thinking_ = false;              // Qwen3's <think> handling
  std::string default_system_;         // Qwen2.5's, when a conversation has no system message
};

}  // namespace rlcpp
