#include "apps/commands.h"
#include "bench/train_bench.h"

namespace rlcpp::cli {

Command add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "benchmarks next to the PyTorch peer (see bench/RESULTS.md)");
  auto which = std::make_shared<std::string>();
  auto train = std::make_shared<bench::TrainBenchOptions>();
  cmd->add_option("what", *which, "train")->required()->check(CLI::IsMember({"train"}));
  cmd->add_option("--preset", train->preset, "model preset: tiny (W1) or qwen05b (W2)");
  cmd->add_option("--batch", train->batch, "sequences per step");
  cmd->add_option("--seq", train->seq, "tokens per sequence");
  cmd->add_option("--iters", train->iters, "timed iterations");
  cmd->add_flag("!--no-peer", train->peer, "skip the PyTorch peer");
  return {cmd, [=]() { return bench::run_train_bench(*train); }};
}

}  // namespace rlcpp::cli
