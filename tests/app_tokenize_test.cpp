// `rlcpp tokenize`: text lines to ids and each token's text (--raw: its byte-level spelling), and back with
// --decode, through the CLI, on the Qwen3 tokenizer.json of tests/data/qwen3 (equal to Hugging Face's:
// tokenizer_bpe_test.cpp); a bad line names FILE:LINE and writes no output file.
#include <gtest/gtest.h>

#include <sstream>

#include "core/config.h"
#include "tests/app_test_support.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

std::string qwen3_dir() {
  const std::string dir = qwen3_fixture_dir();
  return std::filesystem::exists(dir + "/tokenizer.json") ? dir : "";
}

std::vector<Json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

using TokenizeCli = CliTest;

TEST_F(TokenizeCli, EncodesAndDecodesJsonlLines) {
  const std::string dir = qwen3_dir();
  ASSERT_FALSE(dir.empty()) << "the Qwen3 fixture is missing";
  const std::string texts = write("texts.jsonl", "{\"text\": \"Hello 世界\"}\n\n{\"text\": \"<|im_start|>user\\n2+2?\"}\n");
  const std::string ids_file = (dir_ / "ids.jsonl").string();
  CliResult r = run_cli("tokenize " + dir + " --input " + texts + " --out " + ids_file);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<Json> encoded = read_jsonl(ids_file);
  ASSERT_EQ(encoded.size(), 2u);
  EXPECT_EQ(encoded[0]["ids"], Json::parse("[9707, 220, 99489]"));  // Hugging Face's ids
  EXPECT_EQ(encoded[0]["tokens"], Json::parse(R"(["Hello", " ", "世界"])"));  // the text each token stands for
  EXPECT_EQ(encoded[1]["ids"][0], 151644);  // <|im_start|>, never split
  EXPECT_EQ(encoded[1]["tokens"], Json::parse(R"(["<|im_start|>", "user", "\n", "2", "+", "2", "?"])"));
  std::string id_lines;
  for (const Json& e : encoded) id_lines += Json{{"ids", e["ids"]}}.dump() + "\n";
  const std::string ids_in = write("ids_in.jsonl", id_lines);
  r = run_cli("tokenize " + dir + "/tokenizer.json --decode --input " + ids_in);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "{\"text\":\"Hello 世界\"}\n{\"text\":\"<|im_start|>user\\n2+2?\"}\n");
  r = run_cli("tokenize " + dir + " --decode --skip-special --input " + ids_in);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("{\"text\":\"user\\n2+2?\"}"), std::string::npos) << r.output;
}

// A token is shown as the text it stands for; one that holds only part of a character as its bytes, <0xNN>
// each; --raw gives tokenizer.json's byte-level spelling (Hugging Face's `tokens`).
TEST_F(TokenizeCli, TokensReadAsTextAndRawGivesTheByteLevelSpelling) {
  const std::string dir = qwen3_dir();
  ASSERT_FALSE(dir.empty()) << "the Qwen3 fixture is missing";
  const std::string texts = write("texts.jsonl", "{\"text\": \"用🦜\"}\n{\"text\": \"Hello 世界\"}\n");
  CliResult r = run_cli("tokenize " + dir + " --input " + texts);
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(Json::parse(first)["ids"], Json::parse("[11622, 123918, 250]"));  // Hugging Face's ids
  EXPECT_EQ(Json::parse(first)["tokens"], Json::parse(R"(["用", "<0xF0><0x9F><0xA6>", "<0x9C>"])")) << first;
  r = run_cli("tokenize " + dir + " --raw --input " + texts);
  ASSERT_EQ(r.status, 0) << r.output;
  lines = std::istringstream(r.output);
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(Json::parse(first)["tokens"], Json::parse(R"(["çĶ¨", "ðŁ¦", "ľ"])")) << first;
  EXPECT_EQ(Json::parse(second)["tokens"], Json::parse(R"(["Hello", "Ġ", "ä¸ĸçķĮ"])")) << second;
  r = run_cli("tokenize " + dir + " --raw --decode --input " + texts);  // --raw is about encoding
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--decode excludes --raw"), std::string::npos) << r.output;
}

TEST_F(TokenizeCli, BadLinesAndInputsAreErrorsNamingThemAndWriteNothing) {
  const std::string dir = qwen3_dir();
  ASSERT_FALSE(dir.empty());
  const std::string out = (dir_ / "out.jsonl").string();
  const std::string bad = write("bad.jsonl", "{\"text\": \"fine\"}\n{\"txt\": \"typo\"}\n");
  CliResult r = run_cli("tokenize " + dir + " --input " + bad + " --out " + out);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("bad.jsonl:2: expected an object with the one key \"text\""), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
  const std::string bad_id = write("bad_ids.jsonl", "{\"ids\": [1, 999999]}\n");
  r = run_cli("tokenize " + dir + " --decode --input " + bad_id);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("bad_ids.jsonl:1: 999999 is not an id in [0, 151669)"), std::string::npos) << r.output;
  const std::string not_utf8 = write("latin1.jsonl", "{\"text\": \"caf\xe9\"}\n");
  r = run_cli("tokenize " + dir + " --input " + not_utf8);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("latin1.jsonl:1: not JSON"), std::string::npos) << r.output;
  r = run_cli("tokenize " + (dir_ / "ckpt").string() + " --input " + bad);  // a checkpoint without one
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("has no tokenizer.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rlcpp
