// Supervised fine-tuning on a task's (prompt, answer) pairs: `rlcpp sft CONFIG`. The loss is the masked
// cross-entropy of the answer and EOS tokens, averaged over all answer tokens of the global batch. With an `agent`
// environment (agent.env calc or guess) it trains on the environment's expert demonstrations instead, multi-turn,
// the loss on the assistant's tokens only (agent/demonstration.h), and evaluates greedy episodes.
#pragma once

#include <functional>
#include <string>

#include "core/config.h"
#include "agent/agent_config.h"
#include "core/tensorboard.h"
#include "model/lora.h"
#include "tokenizer/chat_template.h"
#include "reward/task_config.h"
#include "trainer/optim_config.h"

namespace rlcpp {

struct SftConfig {
  std::string run_dir = "runs/sft_add3";
  std::string model_preset = "tiny";  // used when init_checkpoint is empty
  std::string init_checkpoint;        // a checkpoint directory to start from
  std::string tokenizer;              // "" = init_checkpoint's tokenizer.json, else the character tokenizer
  uint64_t seed = 1;
  TaskConfig task;
  ChatOptions chat;
  AgentConfig agent;
  int64_t steps = 1500;
  int64_t batch_size = 256;        // sequences per optimizer step
  int64_t micro_batch_size = 128;  // sequences per forward/backward (gradients accumulate)
  OptimConfig optim;
  LoraConfig lora;  // rank > 0: train LoRA adapters on the frozen model (model/lora.h)
  int64_t eval_every = 250;  // steps; 0 = only at the end
  int64_t eval_size = 1000;  // held-out problems (greedy)
  int64_t checkpoint_every = 0;  // steps; 0 = only at the end
  int64_t log_every = 25;
  LoggingConfig logging;

  void validate() const;
  template <class V> void visit(V& v) {
    v("run_dir", run_dir, "output directory; when it holds a run already, NAME-2, NAME-3, ... is used");
    v("model_preset", model_preset,
      "\"tiny\" (W1), \"tiny-long\" (W1, context 128), \"tiny-ctx256\" (W1, context 256), \"qwen05b\" (W2) or \"qwen-tiny\" (the Qwen3 tokenizer's vocabulary), random init, when "
      "init_checkpoint is empty");
    v("init_checkpoint", init_checkpoint, "checkpoint directory to start from");
    v("tokenizer", tokenizer, "a tokenizer.json or a directory holding one; \"\" = init_checkpoint's tokenizer.json when it has one, else the character tokenizer");
    v("seed", seed, "seeds the initial weights and the data order");
    v("task", task, "the task to learn");
    v("chat", chat, "prompts as chat turns (a tokenizer.json with a chat template)");
    v("agent", agent, "episodes: train on the environment's demonstrations, the loss on the assistant's tokens");
    v("steps", steps, "optimizer steps");
    v("batch_size", batch_size, "sequences per optimizer step");
    v("micro_batch_size", micro_batch_size, "sequences per forward/backward; gradients accumulate");
    v("optim", optim, "AdamW and the LR schedule");
    v("lora", lora, "LoRA: train adapters on the frozen model (rank > 0); checkpoints hold the merged model and the "
                    "adapters (adapter/, PEFT's format)");
    v("eval_every", eval_every, "held-out evaluation period in steps (0 = at the end only)");
    v("eval_size", eval_size, "held-out problems per evaluation");
    v("checkpoint_every", checkpoint_every, "checkpoint period in steps (0 = at the end only)");
    v("log_every", log_every, "step line period");
    v("logging", logging, "metrics sinks besides metrics.jsonl");
  }
};

struct SftSummary {
  double final_accuracy = 0;
  double final_loss = 0;
  double seconds = 0;
  std::string checkpoint;  // the last checkpoint written
  bool stopped = false;    // ended early by stop_requested, with that step's checkpoint
};

// stop_requested: asked after each step (loop/run_driver.h RunOutputs::stop_requested); true ends the run there.
SftSummary run_sft(const SftConfig& config, const Json& resolved_config,
                   const std::function<bool()>& stop_requested = {});

}  // namespace rlcpp
