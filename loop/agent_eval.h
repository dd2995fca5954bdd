// Held-out evaluation of an agent run: one greedy episode per held-out task item (the rollout engine's sessions in
// the model's numerics, agent/episode_runner.h), scored by its environment: accuracy is the share of episodes
// that succeed, mean reward their mean return; eval/turns_mean, eval/tool_calls, eval/tool_success, eval/truncated
// beside.
#pragma once

#include <map>
#include <string>

#include "agent/agent_config.h"
#include "loop/evaluation.h"

namespace rlcpp {

struct AgentEvalResult {
  EvalStats stats;
  std::map<std::string, double> metrics;  // eval/turns_mean, eval/tool_calls, eval/tool_success, eval/truncated
};

// `context`: the longest episode (the run's engine context). Episodes run in chunks of options.max_num_seqs.
AgentEvalResult evaluate_episodes(const Transformer& model, const ParameterStore& params, const Task& task,
                                  const Tokenizer& tokenizer, const AgentConfig& agent, const ChatOptions& chat,
                                  const EvalOptions& options, int64_t context);

}  // namespace rlcpp
