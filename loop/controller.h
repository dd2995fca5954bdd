// `rlcpp train CONFIG`: the RL controller. Sets up the run directory, the policy (random, a checkpoint, or an
// SFT warm start), the frozen reference (a KL term or DPO), the PPO critic, and the rollout placement
// (loop/rollout_backend.h: a split worker process fed over the zmq weight-sync channel, or a colocated engine
// on the inproc channel), then runs RL steps (loop/rl_step.h: GRPO, PPO with a critic, or online DPO) with
// periodic held-out evaluation and checkpoints. Per step it writes one line of metrics.jsonl (every figure:
// timing_s/<phase>, timing_share/<phase>, reward/*, mismatch/*, actor/*, critic/*, dpo/*, eval/*) and a few
// samples to samples.jsonl, and prints a step line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "loop/train_config.h"
#include "trainer/communicator.h"

namespace rlcpp {

// Test hooks (`rlcpp train --inject-fault`, hidden from --help): called on the lead at the points where a crash must
// lose nothing. A hook may end the process.
struct TrainHooks {
  std::function<void(int64_t step)> checkpoint_committed;  // step_N is complete (and step N's records written)
  // Asked after each step's work (loop/run_driver.h): true ends the run there, with that step's checkpoint, to be
  // continued by resume_train. Data-parallel: every rank must answer alike.
  std::function<bool()> stop_requested;
};

struct TrainSummary {
  std::string run_dir;
  std::vector<double> mean_rewards;  // per step
  double final_accuracy = 0;         // held-out, at the last step
  std::string checkpoint;            // the last checkpoint written
  double seconds = 0;
  bool stopped = false;              // ended early by TrainHooks::stop_requested (resume_train continues it)
};

// `comm`: this process's rank of a data-parallel launch (loop/data_parallel_step.h); null = one process.
TrainSummary run_train(const TrainConfig& config, const Json& resolved_config, Communicator* comm = nullptr,
                       const TrainHooks& hooks = {});

// Continues the run in `run_dir` (its config.json) from its newest complete checkpoint: weights, optimizer
// moments and step count (the critic's too), RNG positions, step and policy version, and the reference saved at
// the start of the run; metrics.jsonl and samples.jsonl lose the
// records of steps after that checkpoint, so the finished run's files equal an uninterrupted run's. The run's
// lock is taken first (a second process resuming it is refused, naming the first). When config.json no longer
// equals the config the checkpoint was trained under, resuming is refused naming the changed keys, unless
// `allow_config_change` (then they are printed as a warning and the edited config is used).
// Data-parallel, every rank calls it: the lead (rank 0) takes the lock, checks and picks the checkpoint, and the
// other ranks resume from that one.
TrainSummary resume_train(const std::string& run_dir, bool allow_config_change = false,
                          Communicator* comm = nullptr, const TrainHooks& hooks = {});

}  // namespace rlcpp
