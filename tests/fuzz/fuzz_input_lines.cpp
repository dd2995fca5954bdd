// libFuzzer target: the JSONL inputs of `rlcpp generate --prompts` and `rlcpp score --input`
// (loop/input_lines.h): every line of the input through both line parsers, and the whole input as a prompts file.
#include "loop/input_lines.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rlcpp::CharTokenizer tok;
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t begin = 0;
  for (int64_t n = 1; begin <= text.size(); ++n) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    const std::string line = text.substr(begin, end - begin);
    rlcpp::fuzz::expect_only_errors([&] { rlcpp::parse_prompt_line(line, "line " + std::to_string(n), tok, 0); });
    rlcpp::fuzz::expect_only_errors([&] { rlcpp::parse_score_line(line, "line " + std::to_string(n), tok, 32); });
    begin = end + 1;
  }
  const std::string path = rlcpp::fuzz::input_file(data, size, "prompts.jsonl");
  rlcpp::fuzz::expect_only_errors([&] { rlcpp::read_prompt_lines(path, tok); });
  return 0;
}
