#include "apps/commands.h"
#include "apps/config_loading.h"
#include "core/stop_signals.h"
#include "loop/dpo_run.h"

namespace rlcpp::cli {

Command add_dpo_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("dpo", "DPO on preference pairs from a JSONL file (e.g. configs/dpo_pairs_example.json)");
  auto config_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("config", *config_path, "run config (JSON)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", *overrides, "override a key: --set dpo.beta=0.2 (repeatable)");
  return {cmd, [=]() {
    require_one_process("dpo");
    // Ctrl-C or SIGTERM: the run ends after the step in progress, with its checkpoint (status 128 + the signal).
    const StopSignalWatch stop("dpo", "stopping after this step, with a checkpoint; a second signal stops at once");
    DpoRunConfig cfg;
    Json resolved = load_run_config(*config_path, *overrides, cfg);
    return run_dpo(cfg, resolved, [&stop] { return stop.requested(); }).stopped ? 128 + stop.signal() : 0;
  }};
}

}  // namespace rlcpp::cli
