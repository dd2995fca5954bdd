#include <cstdio>

#include "apps/commands.h"
#include "loop/evaluation.h"
#include "model/checkpoint.h"
#include "model/generate.h"

namespace rlcpp::cli {

Command add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "complete a prompt with a checkpoint");
  struct Args {
    std::string checkpoint, prompt;
    float temperature = 0;
    uint64_t seed = 0;
    int64_t max_new_tokens = 8, n = 1;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory")->required();
  cmd->add_option("--prompt", a->prompt, "prompt text, e.g. \"123+456=\"")->required();
  cmd->add_option("--n", a->n, "samples");
  cmd->add_option("--temperature", a->temperature, "sampling temperature (0 = greedy)");
  cmd->add_option("--seed", a->seed, "sampling seed");
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "response length limit");
  return {cmd, [=]() {
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    Transformer model(params.config());
    CharTokenizer tok;
    std::vector<std::vector<int32_t>> prompts(a->n, encode_prompt(tok, a->prompt));
    GenerateOptions opts;
    opts.temperature = a->temperature;
    opts.seed = a->seed;
    opts.max_new_tokens = a->max_new_tokens;
    for (const Generation& g : generate(model, params, prompts, opts)) {
      double sum = 0;
      for (float lp : g.logprobs) sum += lp;
      std::vector<int32_t> body = g.tokens;
      if (g.finished_by_eos) body.pop_back();
      std::printf("%s%s%s\t(logprob %.4f)\n", a->prompt.c_str(), tok.decode(body).c_str(),
                  g.finished_by_eos ? "<eos>" : "", sum);
    }
    return 0;
  }};
}

}  // namespace rlcpp::cli
