// `rlcpp ledger MODEL`: the ledger's rules of thumb for any model's shapes, without a run or its weights
// (report/model_anatomy.h): where the parameters are, KV bytes per token against full multi-head attention,
// 16 B/parameter, 6N, and with --measure this machine's decode and prefill floors.
#include <cstdio>

#include "apps/commands.h"
#include "kernels/machine_peaks.h"
#include "model/model_config.h"
#include "report/model_anatomy.h"

namespace rlcpp::cli {

Command add_ledger_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "ledger", "a model's rules of thumb from its shapes alone: parameters by part, KV bytes per token (GQA "
                "against multi-head), 16 B/parameter, 6N FLOPs; --measure adds this machine's decode and prefill "
                "floors");
  struct Args {
    std::string model;
    AnatomyOptions options;
    bool measure = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("model", a->model, "a preset (tiny, qwen05b), a Hugging Face config.json, or a checkpoint directory")
      ->required();
  cmd->add_option("--dtype", a->options.dtype, "bytes of the weights and KV cache: fp32, bf16, fp16 or int8");
  cmd->add_flag("--measure", a->measure,
                "measure this machine's fp32 matmul peak (1024^3) and memory read bandwidth (a 512 MiB buffer, past "
                "the caches), about half a second, and print the floors of a decode step and of a prefill");
  cmd->add_option("--prefill-tokens", a->options.prefill_tokens, "tokens of the prefill whose floor is printed")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--lora-rank", a->options.lora_rank,
                  "also print LoRA's trained parameters and training memory at this rank on every Linear layer")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  return {cmd, [=]() {
    const ModelConfig model = model_shapes(a->model);
    AnatomyOptions options = a->options;
    anatomy_dtype_bytes(options.dtype);  // refused before the measurement
    if (a->measure) {
      options.matmul_peak_flops = measure_matmul_flops(1024, 1024, 1024, 5);
      options.read_bandwidth = measure_read_bandwidth(int64_t{512} << 20, 5);
    }
    std::fputs(format_model_anatomy(model, a->model, options).c_str(), stdout);
    return 0;
  }};
}

}  // namespace rlcpp::cli
