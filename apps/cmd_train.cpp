#include "apps/commands.h"
#include "apps/config_loading.h"
#include "loop/controller.h"

namespace rlcpp::cli {

Command add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "RL post-training (GRPO) on a task (e.g. configs/grpo_add3.json)");
  auto config_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("config", *config_path, "run config (JSON)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", *overrides, "override a key: --set optim.lr=3e-4 (repeatable)");
  return {cmd, [=]() {
    TrainConfig cfg;
    Json resolved = load_run_config(*config_path, *overrides, cfg);
    run_train(cfg, resolved);
    return 0;
  }};
}

}  // namespace rlcpp::cli
