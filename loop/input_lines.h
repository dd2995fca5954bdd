// The JSONL inputs of `rlcpp generate --prompts` and `rlcpp score --input`, one JSON object per line. Every
// error names FILE:LINE and what is wrong (unknown keys, both forms given, ids that repeat or do not fit); a
// blank line is skipped but counted. tests/fuzz/fuzz_input_lines.cpp fuzzes both parsers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rlcpp {

struct PromptLine {
  std::string text;  // empty when the line gave token ids
  std::vector<int32_t> tokens;
  uint64_t id = 0;
  std::string where = "--prompt";  // FILE:LINE for a line of --prompts
};

// {"prompt": "12+34="} (encode_prompt: BOS and the text, or a chat turn), {"messages": [{"role": "user",
// "content": ...}, ...]} (the tokenizer's chat template) or {"tokens": [1, 5, 7]} (ids as given, each in
// [0, 2^31)), with an optional "id" (the prompt id that keys sampling; default `default_id`).
PromptLine parse_prompt_line(const std::string& line, const std::string& where, const Tokenizer& tok,
                             uint64_t default_id);
// Every prompt of a file (default ids: the index among prompts); ids must differ, at most
// RequestLimits::max_prompts prompts.
std::vector<PromptLine> read_prompt_lines(const std::string& path, const Tokenizer& tok);

// {"text": "12+3=15"} (BOS added, EOS added when "eos": true) or {"tokens": [1, 4, ...]} as is, ids in
// [0, vocab); at least two tokens.
std::vector<int32_t> parse_score_line(const std::string& line, const std::string& where, const Tokenizer& tok,
                                      int64_t vocab);

}  // namespace rlcpp
