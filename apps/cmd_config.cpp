#include <cstdio>

#include "apps/commands.h"
#include "loop/dpo_run.h"
#include "loop/train_config.h"
#include "loop/sft_run.h"

namespace rlcpp::cli {

Command add_config_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "print every config key with its type, default and meaning");
  auto recipe = std::make_shared<std::string>("sft");
  cmd->add_option("recipe", *recipe, "which run config: sft, dpo or train")
      ->check(CLI::IsMember({"sft", "dpo", "train"}));
  return {cmd, [=]() {
    const auto lines = *recipe == "dpo"     ? config_doc(DpoRunConfig{})
                       : *recipe == "train" ? config_doc(TrainConfig{})
                                            : config_doc(SftConfig{});
    for (const auto& line : lines) std::printf("%s\n", line.c_str());
    return 0;
  }};
}

}  // namespace rlcpp::cli
