// The options of the commands that encode prompts (eval, generate): which tokenizer, and whether prompts are
// chat turns (tokenizer/chat_template.h ChatOptions).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tokenizer/chat_template.h"

namespace rlcpp::cli {

inline void add_tokenizer_option(CLI::App* cmd, std::string& tokenizer) {
  cmd->add_option("--tokenizer", tokenizer,
                  "a tokenizer.json or a directory holding one (default: the checkpoint's tokenizer.json when it has "
                  "one, else the character tokenizer)");
}

inline void add_chat_options(CLI::App* cmd, ChatOptions& chat) {
  cmd->add_flag("--chat", chat.enabled,
                "format each prompt as a user turn of the tokenizer's chat template, with the generation prompt");
  cmd->add_option("--system", chat.system, "with --chat: a system message before the user turn");
  cmd->add_flag("!--no-thinking", chat.enable_thinking, "with --chat, Qwen3 templates: an empty think block");
}

}  // namespace rlcpp::cli
