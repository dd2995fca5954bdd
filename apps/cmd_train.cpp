#include "apps/commands.h"
#include "apps/config_loading.h"
#include "loop/controller.h"

namespace rlcpp::cli {

Command add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "RL post-training (GRPO, PPO, online DPO) on a task (e.g. configs/grpo_add3.json)");
  auto config_path = std::make_shared<std::string>();
  auto resume_dir = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto* config_opt = cmd->add_option("config", *config_path, "run config (JSON)")->check(CLI::ExistingFile);
  auto* resume_opt = cmd->add_option("--resume", *resume_dir,
                                     "continue the run in this directory from its newest complete checkpoint")
                         ->check(CLI::ExistingDirectory);
  config_opt->excludes(resume_opt);
  cmd->add_option("--set", *overrides, "override a key: --set optim.lr=3e-4 (repeatable; not with --resume)");
  auto allow_config_change = std::make_shared<bool>(false);
  cmd->add_flag("--allow-config-change", *allow_config_change,
                "with --resume: continue even though the run's config.json was edited since its last checkpoint "
                "(the changed keys are printed)");
  return {cmd, [=]() {
    if (!resume_dir->empty()) {
      RLCPP_CHECK(overrides->empty(), "train --resume: --set is not allowed (the run keeps its config.json)");
      resume_train(*resume_dir, *allow_config_change);
      return 0;
    }
    RLCPP_CHECK(!config_path->empty(), "train: give a CONFIG file or --resume RUN_DIR");
    TrainConfig cfg;
    Json resolved = load_run_config(*config_path, *overrides, cfg);
    run_train(cfg, resolved);
    return 0;
  }};
}

}  // namespace rlcpp::cli
