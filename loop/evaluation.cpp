#include "loop/evaluation.h"

#include "core/error.h"
#include "model/generate.h"

namespace rlcpp {

std::vector<int32_t> encode_prompt(const CharTokenizer& tokenizer, const std::string& prompt) {
  std::vector<int32_t> ids{tokenizer.bos_id()};
  for (int32_t id : tokenizer.encode(prompt)) ids.push_back(id);
  return ids;
}

EvalStats evaluate(const Transformer& model, const ParameterStore& params, const Task& task,
                   const CharTokenizer& tokenizer, const EvalOptions& options) {
  RLCPP_CHECK(options.samples >= 1, "evaluate: samples must be >= 1, got " << options.samples);
  RLCPP_CHECK(options.samples == 1 || options.temperature > 0,
              "evaluate: " << options.samples << " samples per problem need a temperature > 0 (greedy gives one)");
  const std::vector<Problem> problems = task.eval_set(options.problems);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : problems)
    for (int64_t s = 0; s < options.samples; ++s) prompts.push_back(encode_prompt(tokenizer, p.prompt));
  GenerateOptions gen;
  gen.max_new_tokens = options.max_new_tokens;
  gen.temperature = options.temperature;
  gen.seed = options.seed;
  const std::vector<Generation> outs = generate(model, params, prompts, gen);

  std::vector<std::vector<SampleOutcome>> outcomes(problems.size());
  std::vector<std::string> labels;
  for (const Problem& p : problems) labels.push_back(task.problem_class(p));
  for (size_t i = 0; i < problems.size(); ++i) {
    for (int64_t s = 0; s < options.samples; ++s) {
      const Generation& g = outs[i * options.samples + s];
      std::vector<int32_t> body = g.tokens;
      if (g.finished_by_eos) body.pop_back();
      RewardResult r = task.score(problems[i], tokenizer.decode(body), g.finished_by_eos);
      outcomes[i].push_back({r.total, r.correct, static_cast<int64_t>(g.tokens.size())});
    }
  }
  return compute_eval_stats(outcomes, labels);
}

}  // namespace rlcpp
