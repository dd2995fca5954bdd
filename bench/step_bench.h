#pragma once

#include <string>
#include <vector>

namespace rlcpp::bench {

struct StepBenchOptions {
  std::string preset = "tiny";
  int warmup = 2;          // GRPO steps before the timed ones (first rollouts, page faults, worker warm-up)
  int iters = 5;           // timed steps per placement (the median is reported)
  bool colocated = true;   // also time the colocated placement (split, the default, is always timed)
  bool peer = true;
  // torch (Debian's PyTorch 1.13 grpo-step, CPU), trl (TRL's GRPOTrainer), hf-pytorch (Hugging Face generate +
  // a PyTorch update: bench/peers/hf_grpo_step.py, the default on a GPU)
  std::string peers = "torch";
  // Where the trainer and the rollout engine run ("cpu", "cuda", "cuda:N"; on a GPU the split workers share it
  // over cuda-ipc, and the engine runs cuBLAS unless --set numerics.batch_invariant=true), their dtype (fp32,
  // bf16, fp16) and the tokens sampled per response (0 = the recipe's 6).
  std::string device = "cpu";
  std::string dtype = "fp32";
  int64_t new_tokens = 0;
  // key=value overrides of the recipe (rlcpp train's --set), e.g. numerics.batch_invariant=false to time the
  // cost of invariance, rollout.dtype=bf16.
  std::vector<std::string> overrides;
  // Also time these algorithms' steps (trainer/algorithm.h names, each with its own defaults), split placement,
  // in the same run, next to GRPO's.
  std::vector<std::string> algorithms;
  // Also time the split placement with the async pipeline (async.max_staleness = 1) next to the synchronous
  // one, against the goal async step <= max(rollout, rest of the step) + 10 %.
  bool async = false;
  // Slow the split worker down by this many ms an engine step (rlcpp worker --throttle-ms), in every split run:
  // the case where the rollout dominates and overlap must win. The colocated row is then left out.
  double throttle_ms = 0;
  // Also time the split placement as this many data-parallel trainer ranks (mpirun -np N rlcpp train, one
  // OpenMP thread each) next to one rank with every thread; 1 = not.
  int ranks = 1;
};

// One GRPO step of the add3 recipe (configs/grpo_add3_benchmark.json without its warm start) through the real
// controller (run_train) from a random model, split and colocated, with its phase shares, next to the PyTorch
// peer's `grpo-step` of the same shapes, and TRL's GRPOTrainer with the same recipe (peers "trl"); on a GPU next to
// the Hugging Face + PyTorch step on the same GPU (peers "hf-pytorch"). Responses are fixed-length (ignore_eos),
// as the peers'. Returns 0.
int run_step_bench(const StepBenchOptions& options);

}  // namespace rlcpp::bench
