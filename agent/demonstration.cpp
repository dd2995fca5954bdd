#include "agent/demonstration.h"

#include <algorithm>

namespace rlcpp {

Episode demonstrate(const Problem& problem, ExpertEnvironment& env, const TurnProtocol& protocol,
                    const AgentConfig& config, int64_t context, PhiloxStream& rng) {
  const int64_t limit = config.max_tokens > 0 ? std::min(config.max_tokens, context) : context;
  Episode e;
  e.problem = problem;
  e.prompt_text = env.reset(problem);
  e.tools = env.tools();
  const std::vector<ToolSpec>& tools = e.tools;
  e.prompt = protocol.prompt_tokens(e.prompt_text, tools);
  while (true) {
    const std::vector<int32_t> turn = protocol.render_turn(env.expert_turn(rng), tools);
    if (e.length() + static_cast<int64_t>(turn.size()) > limit) {
      e.truncated = true;
      e.end_reason = "max_tokens";
      break;
    }
    e.add_model_tokens(turn, std::vector<float>(turn.size(), 0.0f), -1, true);
    const EnvStep step = env.step(protocol.parse(turn, true, tools));
    e.reward += step.reward;
    e.tool_calls += step.tool_calls;
    e.tool_errors += step.tool_errors;
    if (step.success) e.success = step.success;
    if (step.done) {
      e.done = true;
      e.end_reason = "done";
      break;
    }
    const std::vector<int32_t> obs = protocol.observation_tokens(turn, step);
    if (e.turns() >= config.max_turns || e.length() + static_cast<int64_t>(obs.size()) + 1 > limit) {
      e.truncated = true;
      e.end_reason = e.turns() >= config.max_turns ? "max_turns" : "max_tokens";
      break;
    }
    e.add_environment_tokens(obs, step.observation, step.tool_output);
  }
  return e;
}

}  // namespace rlcpp
