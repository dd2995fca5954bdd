// rlcpp: RL post-training for Llama-family models. `rlcpp --help` lists the subcommands.
#include <cstdio>
#include <exception>
#include <vector>

#include "apps/blas_startup.h"
#include "apps/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  rlcpp::cli::ensure_blas_core_type(argv);
  CLI::App app{"rlcpp: RL post-training (GRPO, PPO, DPO, SFT) of Llama-family models on the CPU; a CUDA build adds "
               "the GPU backend (device=cuda), built but not yet verified on a GPU"};
  app.require_subcommand(1);
  using namespace rlcpp::cli;
  const std::vector<Command> commands = {
      add_sft_command(app),   add_train_command(app), add_dpo_command(app),   add_eval_command(app),   add_generate_command(app),
      add_score_command(app), add_worker_command(app), add_bench_command(app), add_config_command(app),
      add_report_command(app), add_mismatch_command(app), add_keys_command(app), add_tokenize_command(app), add_export_command(app),
      add_scale_command(app), add_ledger_command(app), add_devices_command(app)};
  CLI11_PARSE(app, argc, argv);
  try {
    for (const auto& command : commands)
      if (command.sub->parsed()) return command.run();
  } catch (const rlcpp::Error& e) {
    std::fprintf(stderr, "rlcpp: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlcpp: unexpected error: %s\n", e.what());
    return 2;
  }
  return 0;
}
