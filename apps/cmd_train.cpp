#include <charconv>
#include <csignal>
#include <cstdio>
#include <memory>

#include "apps/commands.h"
#include "apps/config_loading.h"
#include "core/stop_signals.h"
#include "loop/controller.h"
#include "trainer/communicator.h"
#include "trainer/launch_env.h"

namespace rlcpp::cli {

namespace {

// `--inject-fault kill-after-checkpoint:STEP`: the process kills itself (SIGKILL: nothing flushed, no handler)
// right after step STEP's checkpoint is complete, to test that a resumed run loses none of that step's records.
TrainHooks train_fault_hooks(const std::string& spec) {
  TrainHooks hooks;
  if (spec.empty()) return hooks;
  const std::string prefix = "kill-after-checkpoint:";
  const auto bad = [&] {
    return "train: --inject-fault '" + spec + "': expected kill-after-checkpoint:STEP, STEP >= 1";
  };
  RLCPP_CHECK(spec.rfind(prefix, 0) == 0, bad());
  int64_t step = 0;
  const char* last = spec.data() + spec.size();
  const auto [end, ec] = std::from_chars(spec.data() + prefix.size(), last, step);
  RLCPP_CHECK(ec == std::errc() && end == last && step >= 1, bad());
  hooks.checkpoint_committed = [step](int64_t done) {
    if (done != step) return;
    std::fflush(stdout);
    ::raise(SIGKILL);
  };
  return hooks;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train", "RL post-training (GRPO, GSPO, CISPO, REINFORCE++, PPO, online DPO, distillation) on a task (e.g. "
               "configs/grpo_add3.json)");
  auto config_path = std::make_shared<std::string>();
  auto resume_dir = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto* config_opt = cmd->add_option("config", *config_path, "run config (JSON)")->check(CLI::ExistingFile);
  auto* resume_opt = cmd->add_option("--resume", *resume_dir,
                                     "continue the run in this directory from its newest complete checkpoint")
                         ->check(CLI::ExistingDirectory);
  config_opt->excludes(resume_opt);
  cmd->add_option("--set", *overrides, "override a key: --set optim.lr=3e-4 (repeatable; not with --resume)");
  auto dp_backend = std::make_shared<std::string>("mpi");
  cmd->add_option("--dp-backend", *dp_backend,
                  "under mpirun/srun: what sums the ranks' gradients, mpi (CPU) or nccl (each rank's GPU)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  auto allow_config_change = std::make_shared<bool>(false);
  cmd->add_flag("--allow-config-change", *allow_config_change,
                "with --resume: continue even though the run's config.json was edited since its last checkpoint "
                "(the changed keys are printed)");
  // Hidden (group ""): a test tool, documented in loop/README.md "Fault handling".
  auto inject_fault = std::make_shared<std::string>();
  cmd->add_option("--inject-fault", *inject_fault, "kill-after-checkpoint:STEP: SIGKILL once step_STEP is complete")
      ->group("");
  return {cmd, [=]() {
    // Before any thread starts (MPI's, ZeroMQ's, OpenMP's): Ctrl-C or a scheduler's SIGTERM ends the run after
    // the step in progress, with its checkpoint; the exit status is then 128 + the signal.
    const StopSignalWatch stop("train", "stopping after this step, with a checkpoint (`rlcpp train --resume "
                                        "RUN_DIR` continues the run); a second signal stops at once");
    TrainHooks hooks = train_fault_hooks(*inject_fault);
    // Under mpirun or srun, one rank of a data-parallel run (loop/data_parallel_step.h); the lead (rank 0)
    // alone prints the run's progress.
    const std::unique_ptr<Communicator> comm = make_communicator(ranks_from_environment(), *dp_backend);
    if (comm->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
      RLCPP_FAIL("train: rank " << comm->rank() << " cannot silence its stdout");
    // The ranks stop together: a signal reaches them at different moments, so they agree after each step that
    // one of them got it.
    hooks.stop_requested = [&stop, &comm] {
      if (comm->size() == 1) return stop.requested();
      for (const std::string& asked : comm->all_gather(stop.requested() ? "1" : "0"))
        if (asked == "1") return true;
      return false;
    };
    // A stopped run exits 128 + the signal (any rank's: the one this rank got, else SIGTERM's). Data-parallel,
    // no rank exits before the lead has committed the last checkpoint: a launcher ends the others once one
    // exits with a failure.
    const auto exit_status = [&stop, &comm](const TrainSummary& s) {
      if (!s.stopped) return 0;
      if (comm->size() > 1) comm->all_gather("");
      return 128 + (stop.requested() ? stop.signal() : SIGTERM);
    };
    try {
      if (!resume_dir->empty()) {
        RLCPP_CHECK(overrides->empty(), "train --resume: --set is not allowed (the run keeps its config.json)");
        return exit_status(resume_train(*resume_dir, *allow_config_change, comm.get(), hooks));
      }
      RLCPP_CHECK(!config_path->empty(), "train: give a CONFIG file or --resume RUN_DIR");
      TrainConfig cfg;
      Json resolved = load_run_config(*config_path, *overrides, cfg);
      return exit_status(run_train(cfg, resolved, comm.get(), hooks));
    } catch (const std::exception& e) {
      if (comm->size() == 1) throw;
      // One rank failing ends them all (the launcher names the rank too): the others would wait forever in
      // their next collective.
      std::fprintf(stderr, "rlcpp train: rank %d of %d stopped: %s\n", comm->rank(), comm->size(), e.what());
      std::fflush(stderr);
      abort_launch(*comm, 1);
      throw;
    }
  }};
}

void require_one_process(const char* command) {
  const LaunchRanks ranks = ranks_from_environment();
  RLCPP_CHECK(ranks.world_size == 1, command << ": launched as rank " << ranks.rank << " of " << ranks.world_size
                                             << " (" << ranks.launcher << "); only `rlcpp train` runs data-parallel, "
                                             << "run `rlcpp " << command << "` as one process");
}

}  // namespace rlcpp::cli
