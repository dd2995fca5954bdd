// Direct Preference Optimization from a JSONL file of preference pairs (loop/preference_data.h):
// `rlcpp dpo CONFIG`. The frozen reference is a copy of the initial weights; every step trains on batch_size
// pairs drawn without replacement from a fresh seeded permutation per epoch (a step may straddle two epochs).
// Logged per step (metrics.jsonl and the step line): actor/dpo_loss, actor/dpo_reward_chosen,
// actor/dpo_reward_rejected, actor/dpo_reward_margin, actor/dpo_accuracy (measured before the step's update),
// actor/grad_norm, actor/lr; eval/* the same on the held-out pairs, eval/accuracy on the task when asked.
#pragma once

#include <functional>
#include <string>

#include "core/config.h"
#include "core/tensorboard.h"
#include "model/lora.h"
#include "reward/task_config.h"
#include "trainer/algorithm_config.h"
#include "trainer/optim_config.h"

namespace rlcpp {

struct DpoRunConfig {
  std::string run_dir = "runs/dpo_add3";
  std::string model_preset = "tiny";  // used when init_checkpoint is empty
  std::string init_checkpoint;        // policy (and reference) to start from, e.g. an SFT checkpoint
  std::string tokenizer;              // "" = init_checkpoint's tokenizer.json, else the character tokenizer
  uint64_t seed = 1;
  std::string pairs = "configs/data/add3_prefs.jsonl";
  std::string eval_pairs;  // held-out pairs; empty = none
  DpoConfig dpo;
  int64_t epochs = 1;
  int64_t steps = 0;               // 0 = epochs x ceil(pairs / batch_size)
  int64_t batch_size = 32;         // pairs per optimizer step
  int64_t micro_batch_size = 16;   // pairs per forward/backward (gradients accumulate)
  OptimConfig optim;
  LoraConfig lora;  // rank > 0: train LoRA adapters on the frozen model (model/lora.h)
  TaskConfig task;                 // for eval_size > 0: held-out generation accuracy on this task
  int64_t eval_size = 0;           // held-out task problems per evaluation (greedy); 0 = no task evaluation
  int64_t eval_every = 0;          // steps; 0 = only at the end
  int64_t checkpoint_every = 0;    // steps; 0 = only at the end
  int64_t log_every = 10;
  LoggingConfig logging;

  void validate() const;
  template <class V> void visit(V& v) {
    v("run_dir", run_dir, "output directory; when it holds a run already, NAME-2, NAME-3, ... is used");
    v("model_preset", model_preset,
      "\"tiny\", \"qwen05b\" or \"qwen-tiny\", random init, when init_checkpoint is empty");
    v("init_checkpoint", init_checkpoint, "checkpoint directory of the policy to start from (also the reference)");
    v("tokenizer", tokenizer, "a tokenizer.json or a directory holding one; \"\" = init_checkpoint's tokenizer.json when it has one, else the character tokenizer");
    v("seed", seed, "seeds the initial weights (no checkpoint) and the pair order");
    v("pairs", pairs, "JSONL file of {\"prompt\", \"chosen\", \"rejected\"} strings, one pair per line");
    v("eval_pairs", eval_pairs, "held-out JSONL pairs for eval/dpo_* metrics; empty = none");
    v("dpo", dpo, "DPO loss");
    v("epochs", epochs, "passes over the pairs (when steps is 0)");
    v("steps", steps, "optimizer steps; 0 = epochs x ceil(pairs / batch_size)");
    v("batch_size", batch_size, "pairs per optimizer step");
    v("micro_batch_size", micro_batch_size, "pairs per forward/backward; gradients accumulate");
    v("optim", optim, "AdamW and the LR schedule");
    v("lora", lora, "LoRA: train adapters on the frozen model (rank > 0); checkpoints hold the merged model and the "
                    "adapters (adapter/, PEFT's format)");
    v("task", task, "task for the held-out generation accuracy (eval_size > 0)");
    v("eval_size", eval_size, "held-out task problems per evaluation (greedy); 0 = none");
    v("eval_every", eval_every, "evaluation period in steps (0 = at the end only)");
    v("checkpoint_every", checkpoint_every, "checkpoint period in steps (0 = at the end only)");
    v("log_every", log_every, "step line period");
    v("logging", logging, "metrics sinks besides metrics.jsonl");
  }
};

struct DpoSummary {
  int64_t steps = 0;
  double first_loss = 0;      // the first step's loss: log 2, as the policy starts at the reference
  double final_loss = 0;      // the last step's (before its update)
  double final_margin = 0;    // the last step's mean reward margin
  double final_accuracy = 0;  // the last step's pair accuracy
  double eval_accuracy = -1;  // held-out pair accuracy at the end; -1 without eval_pairs
  double eval_margin = 0;
  double task_accuracy = -1;  // held-out task accuracy at the end; -1 without eval_size
  double seconds = 0;
  std::string checkpoint;     // the last checkpoint written
  bool stopped = false;       // ended early by stop_requested, with that step's checkpoint
};

// stop_requested: asked after each step (loop/run_driver.h RunOutputs::stop_requested); true ends the run there.
DpoSummary run_dpo(const DpoRunConfig& config, const Json& resolved_config,
                   const std::function<bool()>& stop_requested = {});

}  // namespace rlcpp
