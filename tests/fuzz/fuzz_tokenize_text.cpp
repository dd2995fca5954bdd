// libFuzzer target: any bytes as text through the real Qwen3 tokenizer.json (tests/data/qwen3, loaded once):
// invalid UTF-8 is an error; valid text encodes (regex split, NFC, added tokens, merges) and its ids decode to
// the NFC form of the text, which encodes to the same ids again.
#include "tokenizer/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/test_fixtures.h"

namespace {

const rlcpp::BpeTokenizer& qwen3() {
  static const rlcpp::BpeTokenizer tok = [] {
    return rlcpp::BpeTokenizer::load(rlcpp::qwen3_fixture_dir() + "/tokenizer.json");
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  rlcpp::fuzz::expect_only_errors([&] {
    const std::vector<int32_t> ids = qwen3().encode(text);
    const std::string decoded = qwen3().decode(ids);
    if (qwen3().encode(decoded) != ids) std::abort();  // decoding gives the normalised text, which round-trips
  });
  return 0;
}
