#include <cstdio>

#include "apps/commands.h"
#include "apps/float_option.h"
#include "apps/seed_option.h"
#include "apps/tokenizer_options.h"
#include "core/error.h"
#include "core/metrics.h"
#include "kernels/temperature.h"
#include "loop/evaluation.h"
#include "model/checkpoint.h"
#include "tokenizer/hf_tokenizer.h"
#include "model/numerics.h"
#include "reward/task_registry.h"
#include "rollout/request_wire.h"

namespace rlcpp::cli {

Command add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "held-out accuracy, mean reward and pass@k of a checkpoint on a task");
  struct Args {
    std::string checkpoint, task = "add3", tokenizer;
    ChatOptions chat;
    int64_t n = 1000, samples = 1;
    float temperature = 0;
    uint64_t seed = 0;
    int64_t max_new_tokens = -1;
    std::string dtype = "fp32", quantization = "none", device = "cpu";
    bool batch_invariant = true;
    std::vector<std::string> task_overrides;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint directory (model.safetensors + config.json)")->required();
  cmd->add_option("--task", a->task, "task name (add3, add, sub, mul, countdown, dataset)");
  const RequestLimits limits;  // a rollout's bounds hold here too: checked before any problem is drawn
  cmd->add_option("--n", a->n, "held-out problems")->check(CLI::Range(int64_t{1}, limits.max_prompts));
  cmd->add_option("--samples", a->samples, "samples per problem (pass@k for k <= samples; needs --temperature)")
      ->check(CLI::Range(int64_t{1}, limits.max_n));
  add_float_option(cmd, "--temperature", a->temperature,
                   "sampling temperature: 0 = greedy, else finite and >= 1e-3 (colder overflows fp32)");
  add_seed_option(cmd, "--seed", a->seed, "sampling seed (a non-negative integer)");
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "response length limit (default: the task's)");
  cmd->add_option("--dtype", a->dtype,
                  "compute dtype of the engine: fp32, bf16, fp16 (model/numerics.h), or tf32 on a cuda --device "
                  "with --batch-invariant false");
  cmd->add_option("--quantization", a->quantization, "decoder Linear weights: none, int8 or fp8_e4m3");
  cmd->add_option("--batch-invariant", a->batch_invariant,
                  "true: packed batch-invariant products; false: OpenBLAS decode (sum order depends on the batch)");
  add_tokenizer_option(cmd, a->tokenizer);
  add_chat_options(cmd, a->chat);
  cmd->add_option("--device", a->device, "where the engine runs: cpu, cuda or cuda:N");
  cmd->add_option("--set", a->task_overrides, "task key, e.g. --set digits=4 --set path=data.jsonl (see rlcpp config)");
  return {cmd, [=]() {
    check_temperature(a->temperature, "eval --temperature", /*zero_is_greedy=*/true);
    parse_device_spec(a->device, "eval --device");  // a misspelling is named before the checkpoint loads
    RLCPP_CHECK(a->n * a->samples <= limits.max_sequences,
                "eval: --n " << a->n << " x --samples " << a->samples << " is more than " << limits.max_sequences
                             << " sequences");
    ParameterStore params = load_model_checkpoint(a->checkpoint);
    // The rollout engine generates in these numerics: evaluate a checkpoint as the RL loop's rollouts run it.
    const ModelNumerics numerics =
        make_numerics(a->dtype, a->quantization, a->batch_invariant, "--dtype", "--quantization");
    check_numerics_device(numerics, parse_device_spec(a->device, "eval --device").device, "--dtype",
                          "--batch-invariant");
    const Transformer model(params.config(), numerics);
    TaskConfig tc;
    Json task_json = {{"name", a->task}};
    for (const auto& o : a->task_overrides) apply_override(task_json, o);
    config_from_json(task_json, tc);
    const std::unique_ptr<Tokenizer> tokenizer =
        load_tokenizer(choose_tokenizer(a->tokenizer, a->checkpoint), params.config(), a->chat);
    std::unique_ptr<Task> task = make_task_for(tc, *tokenizer);
    EvalOptions opts;
    opts.problems = a->n;
    opts.samples = a->samples;
    opts.temperature = a->temperature;
    opts.seed = a->seed;
    opts.device = a->device;
    RLCPP_CHECK(a->max_new_tokens == -1 || a->max_new_tokens >= 1,
                "eval: --max-new-tokens must be >= 1 (or left out for the task's " << task->max_new_tokens()
                                                                                 << "), got " << a->max_new_tokens);
    opts.max_new_tokens = a->max_new_tokens > 0 ? a->max_new_tokens : task->max_new_tokens();
    Stopwatch watch;
    EvalStats s = evaluate(model, params, *task, *tokenizer, opts);
    std::printf("task %s: %lld problems x %lld samples (%s, %s) in %.1fs\n", task->name().c_str(),
                static_cast<long long>(s.problems), static_cast<long long>(s.samples_per_problem),
                a->temperature > 0 ? "sampled" : "greedy", model.numerics().describe().c_str(), watch.seconds());
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
