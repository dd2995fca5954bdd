// The `rlcpp` subcommands: each registers its options on a CLI11 subcommand and returns the action to run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace rlcpp::cli {

using Action = std::function<int()>;

struct Command {
  CLI::App* sub;
  Action run;  // called when `sub` was the subcommand given
};

// Refuses to run `command` as one of several ranks of an mpirun/srun launch (only `rlcpp train` is
// data-parallel): N copies would write the same run directory.
void require_one_process(const char* command);

Command add_sft_command(CLI::App& app);
Command add_dpo_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_score_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_config_command(CLI::App& app);
Command add_worker_command(CLI::App& app);
Command add_train_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_mismatch_command(CLI::App& app);
Command add_keys_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_scale_command(CLI::App& app);
Command add_ledger_command(CLI::App& app);
Command add_devices_command(CLI::App& app);
Command add_serve_command(CLI::App& app);

}  // namespace rlcpp::cli
