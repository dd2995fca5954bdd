#include "agent/agent_config.h"

#include "core/endpoint.h"
#include "core/error.h"

namespace rlcpp {

void AgentConfig::validate(const std::string& prefix) const {
  const std::string key = "config key '" + prefix + ".";
  if (!enabled()) return;
  RLCPP_CHECK(env == "calc" || env == "guess" || env == "remote" || env == "http",
              key << "env': \"" << env
                  << "\", expected \"calc\", \"guess\", \"remote\", \"http\" or \"\" (single-turn)");
  RLCPP_CHECK(max_turns >= 1 && max_turns <= 4096, key << "max_turns': must be in [1, 4096], got " << max_turns);
  RLCPP_CHECK(max_tokens >= 0, key << "max_tokens': must be >= 0 (0 = the engine's context), got " << max_tokens);
  RLCPP_CHECK(max_turn_tokens >= 1, key << "max_turn_tokens': must be >= 1, got " << max_turn_tokens);
  RLCPP_CHECK(call_timeout_s > 0 && call_timeout_s <= 3600,
              key << "call_timeout_s': must be in (0, 3600] seconds, got " << call_timeout_s);
  RLCPP_CHECK(tokenization == "tito" || tokenization == "retokenize",
              key << "tokenization': \"" << tokenization << "\", expected \"tito\" or \"retokenize\"");
  RLCPP_CHECK(turns_per_draw >= 0, key << "turns_per_draw': must be >= 0 (0 = episodes end in their draw), got "
                                       << turns_per_draw);
  RLCPP_CHECK(tokens_per_draw >= 0, key << "tokens_per_draw': must be >= 0 (0 = turns end in their draw), got "
                                        << tokens_per_draw);
  RLCPP_CHECK(tokens_per_draw == 0 || harness_mode(),
              key << "tokens_per_draw': cuts a harness's turns (agent.env \"http\"); in-process episodes stop "
                     "between turns (agent.turns_per_draw)");
  RLCPP_CHECK(demo_tool_share >= 0 && demo_tool_share <= 1,
              key << "demo_tool_share': must be in [0, 1], got " << demo_tool_share);
  RLCPP_CHECK(demo_bisect_share >= 0 && demo_bisect_share <= 1,
              key << "demo_bisect_share': must be in [0, 1], got " << demo_bisect_share);
  RLCPP_CHECK(guess_feedback == "sign" || guess_feedback == "interval",
              key << "guess_feedback': \"" << guess_feedback << "\", expected \"sign\" or \"interval\"");
  if (harness_mode()) {
    RLCPP_CHECK(!harness.empty(), key << "harness': agent.env \"http\" needs the harness's command (e.g. \"python3 "
                                        "scripts/agent_harness_example.py\")");
    RLCPP_CHECK(harness_timeout_s > 0, key << "harness_timeout_s': must be > 0 seconds, got " << harness_timeout_s);
    RLCPP_CHECK(tokenization == "tito", key << "tokenization': a harness's episodes are the server's records, token "
                                               "in/token out (\"tito\"); got \"" << tokenization << "\"");
  }
  if (env == "remote") {
    try {
      const Endpoint e = parse_endpoint(endpoint, EndpointUse::kConnect);
      RLCPP_CHECK(e.transport != "inproc", "inproc:// is no other process's");
    } catch (const Error& e) {
      RLCPP_FAIL(key << "endpoint': the environment server, tcp://HOST:PORT or ipc://PATH: " << e.what());
    }
  }
}

}  // namespace rlcpp
