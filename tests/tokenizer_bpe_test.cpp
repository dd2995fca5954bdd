// rlcpp's byte-level BPE against Hugging Face `tokenizers` (tests/tokenizer_reference.py, in .venv): the same
// ids on a multilingual corpus (English, Chinese, Japanese, Korean, code, emoji, runs of whitespace, CRLF,
// combining characters that NFC changes, special tokens), for the real Qwen3 tokenizer.json
// (tests/data/qwen3), a Llama-3-style one (its split regex, ignore_merges) and a GPT-2-style one (ByteLevel's
// own regex, add_prefix_space) that the library trains in the test; decode gives the library's text back;
// a malformed tokenizer.json is an error naming the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "core/utf8.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tests/error_test_support.h"
#include "tests/python_env.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

const std::string kSource = test_source_dir();
const std::string kCorpus = kSource + "/tests/data/tokenizer_corpus.jsonl";
const std::string kReference = kSource + "/tests/tokenizer_reference.py";

// The real Qwen3 tokenizer.json of tests/data/qwen3.
std::string qwen3_tokenizer() {
  const std::string path = qwen3_fixture_dir() + "/tokenizer.json";
  return fs::exists(path) ? path : "";
}

std::vector<std::string> corpus_texts() {
  std::ifstream in(kCorpus);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(Json::parse(line)["text"].get<std::string>());
  return out;
}

fs::path scratch_dir() {
  const fs::path dir = fs::temp_directory_path() / ("rlcpp_bpe_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

// Every corpus line encoded by rlcpp equals the library's encoding in `reference` (tokenizer_reference.py's
// encode): ids and decoded text.
void expect_same_as_reference(const std::string& tokenizer_json, const fs::path& reference) {
  const Json want = Json::parse(std::ifstream(reference));
  const BpeTokenizer tok = BpeTokenizer::load(tokenizer_json);
  const std::vector<std::string> texts = corpus_texts();
  ASSERT_EQ(want.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE("corpus line " + std::to_string(i + 1) + ": " + Json(texts[i]).dump());
    const std::vector<int32_t> ids = tok.encode(texts[i]);
    EXPECT_EQ(ids, want[i]["ids"].get<std::vector<int32_t>>());
    std::vector<int32_t> with_special = tok.prefix_ids();
    with_special.insert(with_special.end(), ids.begin(), ids.end());
    EXPECT_EQ(with_special, want[i]["ids_with_special"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok.decode(ids), want[i]["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), want[i]["decoded_skip_special"].get<std::string>());
  }
}

// Every corpus line encoded by both; ids and decoded text equal.
void expect_same_as_library(const std::string& tokenizer_json) {
  const fs::path out = scratch_dir() / "reference.json";
  ASSERT_TRUE(run_venv_python("'" + kReference + "' encode '" + tokenizer_json + "' '" + kCorpus + "' '" +
                              out.string() + "'"));
  expect_same_as_reference(tokenizer_json, out);
}

TEST(BpeTokenizer, Qwen3IdsEqualTheLibrarysOnTheCorpus) {
  const std::string path = qwen3_tokenizer();
  ASSERT_FALSE(path.empty()) << "tests/data/qwen3/tokenizer.json is missing";
  expect_same_as_library(path);
}

TEST(BpeTokenizer, Llama3StyleWithIgnoreMergesEqualsTheLibrary) {
  const fs::path dir = scratch_dir() / "llama3";
  ASSERT_TRUE(run_venv_python("'" + kReference + "' make-llama3 '" + kCorpus + "' '" + dir.string() + "'"));
  expect_same_as_library((dir / "tokenizer.json").string());
  // The vocabulary's whole words that no merge reaches come out as one token only through ignore_merges.
  const BpeTokenizer tok = BpeTokenizer::load((dir / "tokenizer.json").string());
  const std::optional<int32_t> word = tok.token_id("Ġunreachable");
  ASSERT_TRUE(word.has_value());
  EXPECT_EQ(tok.encode(" unreachable"), std::vector<int32_t>{*word});
  EXPECT_GT(tok.encode("unreachable").size(), 1u);  // without the space it is no vocabulary entry
  EXPECT_EQ(tok.prefix_ids(), std::vector<int32_t>{*tok.token_id("<|begin_of_text|>")});
}

TEST(BpeTokenizer, Gpt2StyleByteLevelRegexAndPrefixSpaceEqualTheLibrary) {
  const fs::path dir = scratch_dir() / "gpt2";
  ASSERT_TRUE(run_venv_python("'" + kReference + "' make-gpt2 '" + kCorpus + "' '" + dir.string() + "'"));
  expect_same_as_library((dir / "tokenizer.json").string());
}

// Split patterns that can match the empty string ("" splits a text into its characters, as the library does;
// "s*", "e|", a lookahead) and literal {"String": ...} patterns (a space, two, a regex metacharacter), each under
// every behaviour: the library's ids.
TEST(BpeTokenizer, SplitPatternsMatchingEmptyAndLiteralPatternsEqualTheLibrary) {
  const fs::path dir = scratch_dir() / "split";
  ASSERT_TRUE(run_venv_python("'" + kReference + "' split-cases '" + kCorpus + "' '" + dir.string() + "'"));
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename() == "base") continue;
    SCOPED_TRACE(entry.path().filename().string());
    expect_same_as_reference((entry.path() / "tokenizer.json").string(), entry.path() / "reference.json");
    ++cases;
  }
  EXPECT_EQ(cases, 32);
}

TEST(BpeTokenizer, SpecialTokensAreNeverSplitAndDecodeRoundTrips) {
  const std::string path = qwen3_tokenizer();
  ASSERT_FALSE(path.empty());
  const BpeTokenizer tok = BpeTokenizer::load(path);
  const int32_t im_start = *tok.token_id("<|im_start|>"), im_end = *tok.token_id("<|im_end|>");
  EXPECT_TRUE(tok.is_special(im_start));
  EXPECT_EQ(tok.vocab_size(), 151669);
  const std::vector<int32_t> ids = tok.encode("<|im_start|>user\nhi<|im_end|><|im_end|>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), im_start);
  EXPECT_EQ(ids[ids.size() - 1], im_end);
  EXPECT_EQ(ids[ids.size() - 2], im_end);
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "user\nhi");
  for (const std::string& text : corpus_texts()) {
    // NFC may change the text; decoding gives the normalised text back exactly.
    const std::string normalised_once = tok.decode(tok.encode(text));
    EXPECT_EQ(tok.decode(tok.encode(normalised_once)), normalised_once) << Json(text).dump();
  }
  EXPECT_EQ(tok.decode(tok.encode("plain ASCII, no change")), "plain ASCII, no change");
  expect_error([&] { tok.encode("bad \xff byte"); }, {"not valid UTF-8 at byte 4"});
  expect_error([&] { tok.decode({1, -3}); }, {"id -3 at index 1"});
  expect_error([&] { tok.decode({tok.vocab_size()}); }, {"id 151669 at index 0"});
}

TEST(BpeTokenizer, MalformedFilesAreErrorsNamingTheField) {
  const std::string base = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}})";
  EXPECT_EQ(BpeTokenizer::parse(base, "t.json").encode("ab"), (std::vector<int32_t>{2}));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  expect_error([&] { BpeTokenizer::parse(R"({"pre_tokenizer": null})", "t.json"); }, {"t.json has no 'model'"});
  expect_error([&] { BpeTokenizer::parse(with("\"a b\"", "\"a b c\""), "t.json"); },
               {"t.json: model.merges[0]", "two tokens separated by one space"});
  expect_error([&] { BpeTokenizer::parse(with("\"a b\"", "\"a x\""), "t.json"); },
               {"model.merges[0]: \"x\" is not in the vocabulary"});
  expect_error([&] { BpeTokenizer::parse(with("\"ab\": 2", "\"abc\": 2"), "t.json"); },
               {"model.merges[0]: the merged token \"ab\" is not in the vocabulary"});
  expect_error([&] { BpeTokenizer::parse(with("\"type\": \"ByteLevel\"", "\"type\": \"Whitespace\""), "t.json"); },
               {"t.json: pre_tokenizer.type 'Whitespace' is not supported"});
  expect_error([&] { BpeTokenizer::parse(with("\"type\": \"BPE\"", "\"type\": \"WordPiece\""), "t.json"); },
               {"t.json: model.type is 'WordPiece'"});
  expect_error([&] { BpeTokenizer::parse(with("\"b\": 1", "\"b\": \"one\""), "t.json"); },
               {"model.vocab[\"b\"] must be an id"});
  expect_error([&] { BpeTokenizer::parse(base.substr(0, 40), "t.json"); }, {"t.json: not valid JSON"});
  // An id far past the table's size used to allocate a table of 2^30 entries (34 GB) from a 100-byte file (found
  // by fuzz_tokenizer, out of memory); ids leave room for holes, not for a mostly empty table.
  expect_error([&] { BpeTokenizer::parse(with("\"b\": 1", "\"b\": 999999999"), "t.json"); },
               {"model.vocab[\"b\"] must be an id in [0, 1030)", "got 999999999"});
  EXPECT_EQ(BpeTokenizer::parse(with("\"b\": 1", "\"b\": 1029"), "t.json").vocab_size(), 1030);
  const std::string added = R"(, "added_tokens": [{"id": 999999999, "content": "<x>", "special": true}]})";
  expect_error([&] { BpeTokenizer::parse(base.substr(0, base.rfind('}')) + added, "t.json"); },
               {"added_tokens[0].id must be an id in [0, 1032)", "got 999999999"});
  expect_error([&] { BpeTokenizer::parse(std::string(500, '[') + std::string(500, ']'), "t.json"); },
               {"nesting deeper than the limit"});
  expect_error(
      [&] {
        BpeTokenizer::parse(with("\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true",
                                 "\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"}"),
                            "t.json");
      },
      {"t.json: pre_tokenizer.pattern: the pattern does not compile"});
  expect_error([&] { BpeTokenizer::load("/nonexistent/tokenizer.json"); },
               {"/nonexistent/tokenizer.json: cannot read a tokenizer.json"});
}

// Hugging Face applies a tokenizer.json's "truncation" and "padding" when it encodes; rlcpp never cuts or pads
// a text (a prompt past the context is refused, batches are packed), so they are read past (README "Failure
// behaviour"): the ids are those of HF with truncation and padding off.
TEST(BpeTokenizer, TruncationAndPaddingSettingsChangeNoIds) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  const std::string settings = R"("truncation": {"direction": "Right", "max_length": 1, "strategy": "LongestFirst",
      "stride": 0}, "padding": {"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": null,
      "pad_id": 0, "pad_type_id": 0, "pad_token": "a"})";
  const BpeTokenizer plain = BpeTokenizer::parse("{" + model + "}", "plain.json");
  const BpeTokenizer set = BpeTokenizer::parse("{" + settings + ", " + model + "}", "set.json");
  EXPECT_EQ(set.encode("ababab"), (std::vector<int32_t>{2, 2, 2}));
  EXPECT_EQ(set.encode("ababab"), plain.encode("ababab"));
}

TEST(Utf8, LossyRepairReplacesEachMaximalSubpartAsRustDoes) {
  EXPECT_EQ(utf8_lossy("ok"), "ok");
  EXPECT_EQ(utf8_lossy("a\xff" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_lossy("\xE4\xBD"), "\xEF\xBF\xBD");          // a truncated 3-byte character: one U+FFFD
  EXPECT_EQ(utf8_lossy("\xE4\xBD" "x"), "\xEF\xBF\xBD" "x");
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: each byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(utf8_valid_prefix("ab\xE4\xBD\xA0" "c\x80"), 6u);
  size_t at = 0;
  EXPECT_EQ(utf8_next("\xF0\x9F\x98\x80", at), 0x1F600u);
  EXPECT_EQ(at, 4u);
  EXPECT_EQ(utf8_encode(0x1F600), "\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace rlcpp
