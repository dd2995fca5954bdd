#include "loop/evaluation.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "reward/task_registry.h"
#include "rollout/engine.h"

namespace rlcpp {

namespace {

// An engine sized for the request: its context the longest prompt plus the response limit, and a KV cache for
// max_num_seqs such sequences (not of the model's whole context, which for a large model would be most of the
// memory). Fewer blocks than the batch needs would only make the engine preempt and recompute.
EngineConfig eval_engine_config(const ModelConfig& model, const Request& request, int64_t max_num_seqs) {
  EngineConfig c;
  const int64_t sequences = static_cast<int64_t>(request.prompts.size()) * request.n;
  c.max_num_seqs = std::clamp<int64_t>(sequences, 1, max_num_seqs);
  int64_t longest = 0;
  for (const auto& p : request.prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  c.max_context = std::min(model.max_position_embeddings,
                           longest + std::clamp<int64_t>(request.sampling.max_new_tokens, 1,
                                                         model.max_position_embeddings));
  c.num_blocks = c.max_num_seqs * ((c.max_context + c.block_size - 1) / c.block_size);
  c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_context);
  return c;
}

}  // namespace

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& prompt) {
  return tokenizer.encode_prompt(prompt, Json());
}

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const Problem& problem) {
  const auto messages = problem.meta.is_object() ? problem.meta.find("messages") : problem.meta.end();
  return tokenizer.encode_prompt(problem.prompt, messages == problem.meta.end() ? Json() : *messages);
}

std::unique_ptr<Tokenizer> run_tokenizer(const std::string& path, const std::string& configured,
                                         const ModelConfig& model, const ChatOptions& chat) {
  try {
    return load_tokenizer(path, model, chat);
  } catch (const Error& e) {
    if (configured.empty()) throw;
    throw Error("config key 'tokenizer' (" + configured + "): " + e.what());
  }
}

std::unique_ptr<Task> make_task_for(const TaskConfig& config, const Tokenizer& tokenizer) {
  TaskConfig c = config;
  if (tokenizer.charset().empty()) c.charset = "";
  return make_task(c);
}

ExecContext EvalOptions::engine_context() const {
  return context ? *context : context_for_device(device, "eval --device");
}

EvalStats evaluate(const Transformer& model, const ParameterStore& params, const Task& task,
                   const Tokenizer& tokenizer, const EvalOptions& options) {
  RLCPP_CHECK(options.samples >= 1, "evaluate: samples must be >= 1, got " << options.samples);
  RLCPP_CHECK(options.samples == 1 || options.temperature > 0,
              "evaluate: " << options.samples << " samples per problem need a temperature > 0 (greedy gives one)");
  RLCPP_CHECK(options.max_num_seqs >= 1, "evaluate: max_num_seqs must be >= 1, got " << options.max_num_seqs);
  const std::vector<Problem> problems = task.eval_set(options.problems);
  Request request;
  request.n = options.samples;
  request.sampling.temperature = options.temperature;
  request.sampling.max_new_tokens = options.max_new_tokens;
  request.sampling.seed = options.seed;
  for (size_t i = 0; i < problems.size(); ++i) {
    request.prompts.push_back(encode_prompt(tokenizer, problems[i]));
    request.prompt_ids.push_back(i);
  }
  Engine engine(model, params, eval_engine_config(model.config(), request, options.max_num_seqs), 0,
                options.engine_context());
  const RolloutResult result = engine.generate(request);

  std::vector<std::vector<SampleOutcome>> outcomes(problems.size());
  std::vector<std::string> labels;
  for (const Problem& p : problems) labels.push_back(task.problem_class(p));
  for (const Sample& s : result.samples) {  // prompt-major: sample s of problem i at i * samples + s
    const bool eos = s.finish_reason == FinishReason::kEos;
    std::vector<int32_t> body = s.tokens;
    if (eos) body.pop_back();
    const size_t i = static_cast<size_t>(s.prompt_index);
    const RewardResult r = task.score(problems[i], tokenizer.decode(body), eos);
    outcomes[i].push_back({r.total, r.correct, static_cast<int64_t>(s.tokens.size())});
  }
  return compute_eval_stats(outcomes, labels);
}

}  // namespace rlcpp
