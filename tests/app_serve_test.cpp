// `rlcpp serve` as a user runs it: the CLI on a qwen-tiny model with the Qwen3 tokenizer (chat template), driven by
// the pinned `openai` Python client (tests/serve_openai_client.py), then stopped with SIGTERM.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "core/config.h"

#include "tests/app_test_support.h"
#include "tests/python_env.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

TEST(AppServe, TheOpenAiPythonClientCompletesChatsStreamsAndSeesErrors) {
  const std::string src = test_source_dir(), rlcpp = std::string(RLCPP_BINARY_DIR) + "/rlcpp";
  const std::string python = venv_python();
  ASSERT_TRUE(std::filesystem::exists(python)) << python << " does not exist: run scripts/ensure_python.sh";
  // The server in the background on a free port (its first line names it); the client; then SIGTERM.
  const std::string script =
      "set -u; out=$(mktemp); '" + rlcpp + "' serve --preset qwen-tiny --tokenizer '" + qwen3_fixture_dir() +
      "' --model-name qwen-tiny --port 0 --api-key k --max-context 256 > $out 2>&1 & pid=$!; "
      "for i in $(seq 600); do grep -q 'on http://' $out && break; sleep 0.1; done; "
      "port=$(sed -n 's/.* on http:\\/\\/127.0.0.1:\\([0-9]*\\),.*/\\1/p' $out); "
      "'" + python + "' '" + src + "/tests/serve_openai_client.py' \"$port\" k qwen-tiny '" + qwen3_fixture_dir() + "'; rc=$?; "
      "kill -TERM $pid; wait $pid; served=$?; cat $out; rm -f $out; echo \"client $rc server $served\"; "
      "[ $rc = 0 ] && [ $served = 0 ]";
  const CliResult r = run_shell(script);
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.output;
  EXPECT_NE(r.output.find("ok\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("serve: stopped"), std::string::npos) << r.output;
}

using ServeCli = CliTest;

// A seeded request to `rlcpp serve` samples what `rlcpp generate` samples with that seed: the same tokens for each
// of its n choices (choice i = sample i of prompt id 0), though the two engines differ in context, blocks and batch.
TEST_F(ServeCli, ASeededRequestSamplesWhatRlcppGenerateSamples) {
  const std::string rlcpp = std::string(RLCPP_BINARY_DIR) + "/rlcpp", ckpt = (dir_ / "ckpt").string();
  const std::string served = (dir_ / "served.json").string(), generated = (dir_ / "generated.jsonl").string();
  const std::string script =
      "set -u; out=$(mktemp); '" + rlcpp + "' serve '" + ckpt + "' --port 0 > $out 2>&1 & pid=$!; "
      "for i in $(seq 600); do grep -q 'on http://' $out && break; sleep 0.1; done; "
      "port=$(sed -n 's/.* on http:\\/\\/127.0.0.1:\\([0-9]*\\),.*/\\1/p' $out); "
      "curl -s -H 'Content-Type: application/json' -d '{\"prompt\": \"12+34=\", \"seed\": 5, \"temperature\": 1, "
      "\"max_tokens\": 8, \"n\": 3, \"return_token_ids\": true}' http://127.0.0.1:$port/v1/completions > '" +
      served + "'; kill -TERM $pid; wait $pid; served=$?; cat $out; rm -f $out; [ $served = 0 ] && '" + rlcpp +
      "' generate '" + ckpt + "' --prompt 12+34= --seed 5 --temperature 1 --max-new-tokens 8 --n 3 --out '" +
      generated + "'";
  const CliResult r = run_shell(script);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.output;
  std::ifstream in(served);
  std::stringstream text;
  text << in.rdbuf();
  const Json response = Json::parse(text.str());
  std::ifstream lines(generated);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    const Json sample = Json::parse(line);
    ASSERT_LT(i, response["choices"].size()) << text.str();
    EXPECT_EQ(response["choices"][i]["token_ids"], sample["tokens"]) << "choice " << i << "\n" << text.str();
  }
  EXPECT_EQ(i, 3u);
}

}  // namespace
}  // namespace rlcpp
