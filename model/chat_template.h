// Chat conversations to prompt text, as a checkpoint's tokenizer_config.json "chat_template" renders them in
// `transformers`' apply_chat_template (tests/model_chat_template_test.cpp compares the two). rlcpp does not run
// Jinja: it recognises the template's family and renders that family's format, refusing templates it does not
// know rather than guessing:
//   ChatML (Qwen2, Qwen2.5, Qwen3): <|im_start|>ROLE\nCONTENT<|im_end|>\n per message; Qwen2.5's default system
//     message when the conversation has none; Qwen3's <think> handling of assistant turns after the last user
//     turn, and enable_thinking = false's empty think block after the generation prompt;
//   Llama-3: <|begin_of_text|> then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> per message
//     (content trimmed).
// Tools and tool calls are not supported.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

// [{"role": ..., "content": ...}, ...]; errors name `where` and the message.
std::vector<ChatMessage> chat_messages_from_json(const Json& messages, const std::string& where);

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
  Family family() const { return family_; }

 private:
  Family family_ = Family::kChatML;
  bool thinking_ = false;              // Qwen3's <think> handling
  std::string default_system_;         // Qwen2.5's, when a conversation has no system message
};

}  // namespace rlcpp
