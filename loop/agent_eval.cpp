#include "loop/agent_eval.h"

#include <algorithm>

#include "agent/env_maker.h"
#include "core/error.h"
#include "loop/agent_rollout.h"
#include "loop/engine_turns.h"

namespace rlcpp {

AgentEvalResult evaluate_episodes(const Transformer& model, const ParameterStore& params, const Task& task,
                                  const Tokenizer& tokenizer, const AgentConfig& agent, const ChatOptions& chat,
                                  const EvalOptions& options, int64_t context) {
  const std::vector<Problem> problems = task.eval_set(options.problems);
  const std::unique_ptr<TurnProtocol> protocol = make_turn_protocol(tokenizer, chat.enable_thinking, chat.system);
  const EnvMaker envs(agent, task);
  EngineConfig ec;
  ec.max_context = std::min(context, model.config().max_position_embeddings);
  ec.max_num_seqs = std::clamp<int64_t>(static_cast<int64_t>(problems.size()), 1, std::min<int64_t>(options.max_num_seqs, 256));
  ec.num_blocks = ec.max_num_seqs * ((ec.max_context + ec.block_size - 1) / ec.block_size);
  ec.max_num_batched_tokens = std::max(ec.max_num_batched_tokens, ec.max_context);
  Engine engine(model, params, ec, 0, options.engine_context());
  SamplingParams greedy;
  greedy.temperature = options.temperature;
  EngineTurns turns(engine, greedy);

  std::vector<Episode> episodes(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) {
    episodes[i].problem = problems[i];
    episodes[i].group = static_cast<int64_t>(i);
    episodes[i].seed = options.seed;
  }
  for (size_t begin = 0; begin < episodes.size(); begin += static_cast<size_t>(ec.max_num_seqs)) {
    std::vector<Episode*> chunk;
    for (size_t i = begin; i < std::min(episodes.size(), begin + static_cast<size_t>(ec.max_num_seqs)); ++i)
      chunk.push_back(&episodes[i]);
    AgentConfig whole = agent;
    whole.turns_per_draw = 0;  // an evaluation's episodes end in it
    run_episodes(chunk, turns, envs.factory(), *protocol, whole, envs.remote() ? 16 : 1);
  }
  std::vector<std::vector<SampleOutcome>> outcomes;
  std::vector<std::string> labels;
  for (const Episode& e : episodes) {
    outcomes.push_back({{e.reward, e.success.value_or(false), static_cast<int64_t>(e.tokens.size())}});
    labels.push_back(task.problem_class(e.problem));
  }
  AgentEvalResult out;
  out.stats = compute_eval_stats(outcomes, labels);
  for (const auto& [k, v] : agent_metrics(episodes))
    if (k != "agent/episodes") out.metrics["eval/" + k.substr(6)] = v;
  return out;
}

}  // namespace rlcpp
