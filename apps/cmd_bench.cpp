#include "apps/commands.h"
#include "core/error.h"
#include "bench/agent_bench.h"
#include "bench/rollout_bench.h"
#include "bench/rollout_numerics_bench.h"
#include "bench/step_bench.h"
#include "bench/tokenizer_bench.h"
#include "bench/train_bench.h"

namespace rlcpp::cli {

Command add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "benchmarks next to the PyTorch peer (see bench/RESULTS.md)");
  auto which = std::make_shared<std::string>();
  auto train = std::make_shared<bench::TrainBenchOptions>();
  auto rollout = std::make_shared<bench::RolloutBenchOptions>();
  auto step = std::make_shared<bench::StepBenchOptions>();
  auto tokenize = std::make_shared<bench::TokenizerBenchOptions>();
  auto agent = std::make_shared<bench::AgentBenchOptions>();
  cmd->add_option("what", *which, "train | rollout | step | tokenize | agent")
      ->required()
      ->check(CLI::IsMember({"train", "rollout", "step", "tokenize", "agent"}));
  cmd->add_option("--turns", agent->turns, "agent: episode lengths in turns, comma-separated (default 1,4,16)")
      ->delimiter(',');
  cmd->add_option("--episodes", agent->episodes, "agent: episodes run side by side (default 16)");
  cmd->add_option("--observation-len", agent->observation_len,
                  "agent: tokens appended after each turn but the last (default 8)");
  cmd->add_option("--tokenizer", tokenize->tokenizer, "tokenize: a tokenizer.json or a checkpoint directory");
  cmd->add_option("--input", tokenize->inputs,
                  "tokenize: text files, encoded line by line, each one's characters and bytes per token printed "
                  "(repeatable; default: the project's docs, corpus and code)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--preset", train->preset,
                  "model preset: tiny (W1), qwen05b (W2) or qwen-tiny; train and rollout also take a Hugging Face "
                  "config.json (random weights of its shapes)");
  auto* iters = cmd->add_option("--iters", train->iters, "timed iterations (step: timed GRPO steps, default 5)");
  cmd->add_flag("!--no-peer", train->peer, "skip every peer");
  auto peers = std::make_shared<std::string>();
  cmd->add_option("--peers", *peers,
                  "peers run beside rlcpp, comma-separated (default torch: Debian's PyTorch 1.13 scripts); the real "
                  "systems of scripts/install_peers.sh: train: pytorch2 (eager and torch.compile); rollout: "
                  "llama.cpp, vllm, hf (Hugging Face generate on the GPU of --device, the machine's python3); step: "
                  "trl (TRL's GRPOTrainer), hf-pytorch (Hugging Face generate + a PyTorch update, the machine's python3; "
                  "the default with --device cuda); train on a GPU: pytorch-gpu (the machine's PyTorch on that GPU)");
  cmd->add_option("--dtype", rollout->dtype,
                  "rollout: rlcpp's and the peers' dtype, fp32 or bf16; train: the trainer's (bf16: the peers under "
                  "autocast); step: "
                  "the trainer's and the engine's (fp32, bf16, fp16)");
  cmd->add_option("--device", rollout->device,
                  "rollout: where rlcpp's engine runs; train: where the trainer runs; step: where both run, the split "
                  "worker sharing the GPU over cuda-ipc (cpu, cuda or cuda:N)");
  cmd->add_option("--batch-invariant", rollout->batch_invariant,
                  "rollout: rlcpp's numerics.batch_invariant (false: cuBLAS on a GPU, OpenBLAS on the CPU)");
  cmd->add_option("--long-tail", rollout->long_tail_sequences,
                  "rollout: sequences of the long-tail shape (54 new tokens each; 0 = skip it)");
  cmd->add_option("--batch", train->batch, "train: sequences per step");
  cmd->add_option("--seq", train->seq, "train: tokens per sequence");
  cmd->add_option("--prompts", rollout->prompts, "rollout: prompts");
  cmd->add_option("--group", rollout->group, "rollout: samples per prompt");
  auto* prompt_len = cmd->add_option("--prompt-len", rollout->prompt_len, "rollout, agent: prompt tokens");
  auto* new_tokens = cmd->add_option("--new-tokens", rollout->new_tokens,
                                     "rollout: tokens sampled per sequence; step: per response (default the "
                                     "recipe's 6); agent: per turn (default 8)");
  cmd->add_option("--block-size", rollout->block_size, "rollout: KV-cache block size");
  auto numerics = std::make_shared<std::string>();
  cmd->add_option("--numerics", *numerics,
                  "rollout: compare engines in these numerics instead of the peer, comma-separated "
                  "DTYPE[+QUANT][/blas], e.g. fp32,bf16,fp16,bf16+int8,fp32+fp8_e4m3,fp32/blas (the first is the "
                  "baseline)");
  cmd->add_option("--warmup", step->warmup, "step: GRPO steps before the timed ones");
  cmd->add_flag("!--no-colocated", step->colocated, "step: time the split placement only");
  cmd->add_option("--algorithms", step->algorithms,
                  "step: also time these algorithms' steps next to GRPO's, e.g. gspo,cispo,reinforce_pp,ppo,dpo")
      ->delimiter(',');
  cmd->add_flag("--async", step->async,
                "step: also time the split placement with the async pipeline (async.max_staleness = 1)");
  cmd->add_option("--ranks", step->ranks,
                  "step: also time N data-parallel trainer ranks of one thread each (mpirun -np N rlcpp train)");
  cmd->add_option("--throttle-ms", step->throttle_ms,
                  "step: slow the split worker by this many ms an engine step (a rollout-bound step; no colocated "
                  "row)");
  cmd->add_option("--set", step->overrides,
                  "step: override a key of the recipe, e.g. numerics.batch_invariant=false (repeatable)");
  return {cmd, [=]() {
    if (!peers->empty()) train->peers = rollout->peers = step->peers = *peers;
    if (*which == "tokenize") {
      RLCPP_CHECK(!tokenize->tokenizer.empty(), "bench tokenize: --tokenizer TOKENIZER_JSON_OR_CHECKPOINT is needed");
      if (iters->count() > 0) tokenize->iters = train->iters;
      tokenize->peer = train->peer;
      return bench::run_tokenizer_bench(*tokenize);
    }
    if (*which == "agent") {
      agent->preset = train->preset;
      if (iters->count() > 0) agent->iters = train->iters;
      if (new_tokens->count() > 0) agent->turn_tokens = rollout->new_tokens;
      if (prompt_len->count() > 0) agent->prompt_len = rollout->prompt_len;
      return bench::run_agent_bench(*agent);
    }
    if (*which == "step") {
      step->preset = train->preset;
      if (iters->count() > 0) step->iters = train->iters;
      step->peer = train->peer;
      step->device = rollout->device;
      step->dtype = rollout->dtype;
      if (new_tokens->count() > 0) step->new_tokens = rollout->new_tokens;
      return bench::run_step_bench(*step);
    }
    if (*which == "rollout") {
      rollout->preset = train->preset;
      rollout->iters = train->iters;
      rollout->peer = train->peer;
      if (!numerics->empty()) return bench::run_rollout_numerics_bench(*rollout, *numerics);
      return bench::run_rollout_bench(*rollout);
    }
    train->device = rollout->device;
    train->dtype = rollout->dtype;
    return bench::run_train_bench(*train);
  }};
}

}  // namespace rlcpp::cli
