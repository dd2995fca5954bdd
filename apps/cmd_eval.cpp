#include <cstdio>

#include "apps/commands.h"
#include "core/metrics.h"
#include "loop/evaluation.h"
#include "model/checkpoint.h"
#include "reward/task_registry.h"

namespace rlcpp::cli {

Command add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "held-out accuracy, mean reward and pass@k of a checkpoint on a task");
  struct Args {
    std::string checkpoint, task = "add3";
    int64_t n = 1000, samples = 1;
    float temperature = 0;
    uint64_t seed = 0;
    int64_t max_new_tokens = -1;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory (model.safetensors + config.json)")->required();
  cmd->add_option("--task", a->task, "task name (add3, add, sub, mul, countdown, dataset)");
  cmd->add_option("--n", a->n, "held-out problems");
  cmd->add_option("--samples", a->samples, "samples per problem (pass@k for k <= samples; needs --temperature)");
  cmd->add_option("--temperature", a->temperature, "sampling temperature (0 = greedy)");
  cmd->add_option("--seed", a->seed, "sampling seed");
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "response length limit (default: the task's)");
  return {cmd, [=]() {
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    Transformer model(params.config());
    TaskConfig tc;
    tc.name = a->task;
    std::unique_ptr<Task> task = make_task(tc);
    EvalOptions opts;
    opts.problems = a->n;
    opts.samples = a->samples;
    opts.temperature = a->temperature;
    opts.seed = a->seed;
    opts.max_new_tokens = a->max_new_tokens > 0 ? a->max_new_tokens : tc.max_new_tokens;
    Stopwatch watch;
    EvalStats s = evaluate(model, params, *task, CharTokenizer(), opts);
    std::printf("%s", format_eval_stats(s).c_str());
    std::printf("(%lld problems x %lld samples in %.1fs)\n", static_cast<long long>(a->n),
                static_cast<long long>(a->samples), watch.seconds());
    return 0;
  }};
}

}  // namespace rlcpp::cli
