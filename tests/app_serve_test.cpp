// `rlcpp serve` as a user runs it: the CLI on a qwen-tiny model with the Qwen3 tokenizer (chat template), driven by
// the pinned `openai` Python client (tests/serve_openai_client.py), then stopped with SIGTERM.
#include <gtest/gtest.h>
#include <sys/wait.h>

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
      "'" + python + "' '" + src + "/tests/serve_openai_client.py' \"$port\" k qwen-tiny; rc=$?; "
      "kill -TERM $pid; wait $pid; served=$?; cat $out; rm -f $out; echo \"client $rc server $served\"; "
      "[ $rc = 0 ] && [ $served = 0 ]";
  const CliResult r = run_shell(script);
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.output;
  EXPECT_NE(r.output.find("ok\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("serve: stopped"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rlcpp
