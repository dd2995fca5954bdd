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
    std::vector<std::string> task_overrides;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory (model.safetensors + config.json)")->required();
  cmd->add_option("--task", a->task, "task name (add3, add, sub, mul, countdown, dataset)");
  cmd->add_option("--n", a->n, "held-out problems");
  cmd->add_option("--samples", a->samples, "samples per problem (pass@k for k <= samples; needs --temperature)");
  cmd->add_option("--temperature", a->temperature, "sampling temperature (0 = greedy)");
  cmd->add_option("--seed", a->seed, "sampling seed");
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "response length limit (default: the task's)");
  cmd->add_option("--set", a->task_overrides, "task key, e.g. --set digits=4 --set path=data.jsonl (see rlcpp config)");
  return {cmd, [=]() {
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    Transformer model(params.config());
    TaskConfig tc;
    Json task_json = {{"name", a->task}};
    for (const auto& o : a->task_overrides) apply_override(task_json, o);
    config_from_json(task_json, tc);
    std::unique_ptr<Task> task = make_task(tc);
    EvalOptions opts;
    opts.problems = a->n;
    opts.samples = a->samples;
    opts.temperature = a->temperature;
    opts.seed = a->seed;
    opts.max_new_tokens = a->max_new_tokens > 0 ? a->max_new_tokens : task->max_new_tokens();
    Stopwatch watch;
    EvalStats s = evaluate(model, params, *task, CharTokenizer(), opts);
    std::printf("task %s: %lld problems x %lld samples (%s) in %.1fs\n", task->name().c_str(),
                static_cast<long long>(s.problems), static_cast<long long>(s.samples_per_problem),
                a->temperature > 0 ? "sampled" : "greedy", watch.seconds());
    std::printf("  accuracy     %.2f%%\n  mean reward  %.4f\n", 100.0 * s.accuracy, s.mean_reward);
    for (size_t k = 1; k <= s.pass_at_k.size(); k *= 2)
      std::printf("  pass@%-6zu %.2f%%\n", k, 100.0 * s.pass_at_k[k - 1]);
    if (s.pass_at_k.size() > 1 && (s.pass_at_k.size() & (s.pass_at_k.size() - 1)) != 0)
      std::printf("  pass@%-6zu %.2f%%\n", s.pass_at_k.size(), 100.0 * s.pass_at_k.back());
    std::printf("  response length: mean %.2f, min %lld, p50 %.1f, p90 %.1f, max %lld tokens\n", s.length.mean,
                static_cast<long long>(s.length.min), s.length.p50, s.length.p90,
                static_cast<long long>(s.length.max));
    if (!s.classes.empty()) {
      std::printf("  by class (%s):\n", task->name().c_str());
      for (const ClassStats& c : s.classes)
        std::printf("    %-10s %6.2f%%  of %lld problems\n", c.label.c_str(), 100.0 * c.accuracy,
                    static_cast<long long>(c.problems));
    }
    std::printf("%s\n", eval_stats_to_json(s).dump().c_str());
    return 0;
  }};
}

}  // namespace rlcpp::cli
