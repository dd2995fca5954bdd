// The `rlcpp train CONFIG` run config: everything a GRPO-family, REINFORCE++, PPO or online DPO run needs, with the add3 GRPO
// recipe of docs/benchmarks.md as the defaults (64 prompts x 8, temperature 1, 6 new tokens, PPO-clip 0.2,
// two mini-batches of 32 groups, AdamW lr 1e-4 betas 0.9/0.95, no weight decay, grad clip 1.0).
//
// `algorithm.name` picks the algorithm and the defaults of the rest of `algorithm` (algorithm_defaults: PPO
// gets GAE and a k1 KL penalty in the reward), so read a TrainConfig with config_from_json(j, TrainConfig&)
// below, which applies them before the file's keys.
#pragma once

#include <string>

#include "core/config.h"
#include "agent/agent_config.h"
#include "core/tensorboard.h"
#include "loop/consistency_probe_config.h"
#include "loop/group_filter.h"
#include "loop/sft_run.h"
#include "model/lora.h"
#include "model/numerics.h"
#include "reward/reward_function.h"
#include "reward/task_config.h"
#include "rollout/engine.h"
#include "rollout/request.h"
#include "trainer/algorithm_config.h"
#include "trainer/communicator.h"
#include "trainer/optim_config.h"
#include "trainer/ppo_epochs.h"

namespace rlcpp {

// rollout.placement = "remote": `rlcpp worker` processes the user started (on other hosts), each bound at its own
// request and weight-sync endpoints; the trainer connects to them, brings them to its policy at the start
// (a rebase publish: whatever weights and version they held) and after every update.
struct RemoteWorkersSection {
  std::vector<std::string> endpoints;          // each worker's request endpoint (its --bind)
  std::vector<std::string> weights_endpoints;  // each worker's --weights endpoint, in the same order
  std::string key;                             // the trainer's CURVE key pair (PREFIX.key of rlcpp keys)
  std::vector<std::string> worker_keys;        // the workers' public keys (.pub): one per endpoint, or one for all
  std::string listen;                          // instead of endpoints: where workers connect to (--connect)
  int64_t min_workers = 1;                     // listen: workers to wait for before step 1

  template <class V> void visit(V& v) {
    v("endpoints", endpoints,
      "remote: the workers' request endpoints (each `rlcpp worker --bind`), e.g. [\"tcp://10.0.0.8:5600\"]; a "
      "rollout's prompts are divided among them");
    v("weights_endpoints", weights_endpoints,
      "remote: each worker's weight-sync endpoint (its --weights), in the order of endpoints");
    v("key", key,
      "remote: the trainer's CURVE key pair (PREFIX.key of `rlcpp keys PREFIX`); needed for any endpoint beyond "
      "this machine, and then every connection is authenticated and encrypted");
    v("worker_keys", worker_keys,
      "remote: the workers' public keys (PREFIX.pub), one per endpoint or one shared by all; with listen, the "
      "keys of the workers admitted to join");
    v("listen", listen,
      "remote, instead of endpoints: the trainer binds here (e.g. \"tcp://0.0.0.0:5600\") and workers join by "
      "`rlcpp worker CKPT --connect tcp://TRAINER:5600 --weights tcp://THEIR_HOST:PORT`, before step 1 or while "
      "the run goes on (each is sent the current weights, then serves from the next step)");
    v("min_workers", min_workers,
      "remote with listen: workers that must have joined before step 1 (waited for up to "
      "rollout.worker_timeout_s)");
  }
};

struct RolloutSection {
  std::string placement = "split";  // "split" | "colocated" (in-process engine) | "remote" (workers started by you)
  std::string dtype = "fp32";         // the engine's compute dtype (model/numerics.h)
  std::string quantization = "none";  // the engine's Linear weights: none | int8 | fp8_e4m3
  std::string device;                 // where the engine runs: cpu | cuda | cuda:N; "" = the run's device
  std::string worker_binary;         // the rlcpp executable for split workers; "" = this executable
  std::string weight_sync = "zmq";   // split: how weights reach the workers: zmq | cuda-ipc | nccl
  int64_t num_workers = 1;           // split: worker processes sharing each rollout
  int64_t chunk_prompts = 0;         // prompts per request handed to the next idle worker; 0 = automatic
  int64_t prompts_per_step = 64;
  int64_t group_size = 8;
  SamplingParams sampling;  // seed must stay 0: each step's is derived from the run seed
  EngineConfig engine;
  bool prefix_cache = true;  // the engine's prefix cache (EngineConfig::prefix_cache)
  bool lora_merge = true;    // a LoRA run: the engine merges each version's adapters (or runs them unmerged)
  RemoteWorkersSection remote;
  // split and remote: fault handling (loop/README.md "Fault handling")
  double worker_heartbeat_timeout_s = 30;  // silence from a generating worker (heartbeats every <= 1 s)
  double worker_timeout_s = 600;           // longest wait for a worker's result or weight acknowledgement
  int64_t max_worker_restarts = 3;         // per step; past it the run stops

  // `engine` with prefix_cache as this section sets it: what the run's engines are built with.
  EngineConfig engine_config() const {
    EngineConfig e = engine;
    e.prefix_cache = prefix_cache;
    return e;
  }

  template <class V> void visit(V& v) {
    v("placement", placement,
      "split: one `rlcpp worker` process over ipc:// in the run dir, weights pushed over zmq after each update; "
      "colocated: the engine runs in the trainer process and sync is a version bump; remote: workers you started "
      "(other hosts), listed in rollout.remote, fed over zmq like split ones");
    v("dtype", dtype,
      "the rollout engine's compute dtype: fp32, bf16 or fp16 (weights, matmul inputs, activations and KV cache "
      "in that dtype, fp32 accumulation; model/numerics.h), or tf32 (fp32 values, products on CUDA tensor cores "
      "with TF32 operands: a cuda device with numerics.batch_invariant false)");
    v("quantization", quantization,
      "the rollout engine's decoder Linear weights: none (the compute dtype's), int8 or fp8_e4m3 (weight-only, "
      "one scale per output channel, re-quantised at every sync; lm_head and embeddings stay in the dtype)");
    v("device", device,
      "where the rollout engine runs: cpu, cuda or cuda:N (its KV cache and the weights, prepared there at each "
      "sync, on that GPU; split workers are started with --device; remote workers use their own command line's); "
      "\"\" = the run's device");
    v("num_workers", num_workers, "split: worker processes; each rollout's prompts are handed out among them in "
                                  "chunks, each to the next idle worker (a fast worker takes more)");
    v("chunk_prompts", chunk_prompts, "split and remote: prompts per chunk; 0 = automatic (one chunk for one "
                                      "worker, else about four a worker, of at least 4 prompts where there are "
                                      "that many)");
    v("worker_binary", worker_binary, "rlcpp executable that runs split workers (\"\" = this one)");
    v("weight_sync", weight_sync,
      "split: how each new policy reaches the workers: zmq (the weights' bytes over ipc://, any device) or "
      "cuda-ipc (trainer and workers on this host's GPUs, one shared or each its own: a device-to-device copy "
      "from the trainer's exported buffer, announced over zmq; weightsync/cuda_ipc_channel.h) or nccl (each "
      "worker w on a GPU of its own, cuda:(D + w) for rollout.device = cuda:D: a broadcast from the trainer's GPU, "
      "announced over zmq, aborted and named past rollout.worker_timeout_s; weightsync/nccl_channel.h)");
    v("prompts_per_step", prompts_per_step, "prompts per rollout batch");
    v("group_size", group_size, "samples per prompt (the GRPO group)");
    v("sampling", sampling, "sampling parameters (sampling.seed must stay 0: each step's seed is derived from the "
                            "run's seed)");
    v("engine", engine, "rollout engine knobs (rollout/README.md); remote workers use their own command line's");
    v("prefix_cache", prefix_cache,
      "the engine keeps full KV blocks findable by their tokens (a hash chain salted with the policy version and "
      "numerics): a prompt prefix seen before under the same weights is not prefilled again; a group's samples "
      "share their prompt's blocks either way; remote workers use their own --prefix-cache");
    v("lora_merge", lora_merge,
      "a LoRA run (trainer.lora): true, the engine decodes with each version's adapters merged into its weights "
      "(the trainer's merged model, bit for bit); false, it keeps the base as prepared once and applies the "
      "adapters unmerged, x·W + s·(x·A)·B (a sync replaces the adapters alone, nothing is merged or repacked; "
      "the merged trainer then differs by rounding, which mismatch/* shows); host engines");
    v("remote", remote, "remote: the workers' endpoints and CURVE keys (loop/README.md \"Remote workers\")");
    v("worker_heartbeat_timeout_s", worker_heartbeat_timeout_s,
      "split: a generating worker heartbeats at least every second; one silent this long (hung, stopped) is "
      "killed, restarted with the current weights and its unfinished prompts re-issued; remote: the run stops "
      "naming it (also the wait for a remote worker's first answer)");
    v("worker_timeout_s", worker_timeout_s,
      "split: longest wait for a worker's result to its share of a rollout, or for its acknowledgement of a "
      "weight sync, before it is killed and restarted as above (generous: a slow step is not a fault); remote: "
      "the run stops naming it");
    v("max_worker_restarts", max_worker_restarts,
      "split: worker restarts allowed within one step (a worker that exited, was killed or timed out); one "
      "more failure stops the run naming the worker and what happened; 0 = the first failure stops it");
  }
};

struct WarmStartSection {
  bool enabled = false;  // run SFT first (config `sft`) and start RL from its final checkpoint
  SftConfig sft;

  template <class V> void visit(V& v) {
    v("enabled", enabled, "run SFT first and start RL from its final checkpoint (ignored with init_checkpoint)");
    v("sft", sft, "the SFT run (rlcpp config sft); its run_dir is placed under this run's directory");
  }
};

// The PPO critic (algorithm.name "ppo"): a value-head model started from the policy's weights (model/critic.h)
// with its own AdamW. It shares the ppo.* epochs and mini-batches and algorithm.ppo's value loss settings.
struct CriticSection {
  OptimConfig optim;

  CriticSection();
  template <class V> void visit(V& v) {
    v("optim", optim, "the critic's AdamW and LR schedule (a value head learns from scratch: a higher lr than "
                      "the actor's)");
  }
};

struct TrainerSection {
  std::string dtype = "fp32";  // the trainer's compute dtype (fp32 master weights and AdamW always)
  int64_t grad_shards = 0;     // ordered gradient sums over this many shards (0: off)
  double collective_timeout_s = kDefaultCollectiveTimeoutS;  // data-parallel ranks: longest wait in a collective
  LoraConfig lora;  // rank > 0: train LoRA adapters on a frozen base (model/lora.h)

  template <class V> void visit(V& v) {
    v("dtype", dtype,
      "the trainer's compute dtype for the RL forward and backward: fp32, bf16 or fp16 (fp32 master weights, "
      "gradients and AdamW always; the SFT warm start runs in fp32), or tf32 (fp32 values, products on CUDA "
      "tensor cores with TF32 operands: a cuda device with numerics.batch_invariant false)");
    v("grad_shards", grad_shards,
      "S >= 2: each mini-batch's gradient is the sum, in order, of S contiguous shards' gradients (each summed from "
      "zero) — what S data-parallel ranks compute, so a run on S ranks (mpirun -np S, the gathered shards added in "
      "rank order) and one on a single process give the same weights bit for bit; 0: one running sum (alone) or an "
      "all-reduce (ranks), which agree to rounding only");
    v("collective_timeout_s", collective_timeout_s,
      "data-parallel ranks (mpirun): the longest a rank waits in one collective, in seconds (at most a week); the "
      "other ranks wait in one while the lead runs a step's rollout, evaluation and checkpoint, so it must exceed "
      "those (the SFT warm start is waited for without it). Past it the run stops naming the ranks that do not "
      "answer (stopped, hung, or busy longer); NCCL's all-reduce is aborted then too");
    v("lora", lora,
      "LoRA: train adapters on the frozen policy (its base is also the KL reference), merged into the weights the "
      "rollout and the trainer compute with; checkpoints hold the merged model and the adapters (PEFT format)");
  }
};

struct NumericsSection {
  bool batch_invariant = true;

  template <class V> void visit(V& v) {
    v("batch_invariant", batch_invariant,
      "true: the rollout engine's products are the packed fma chains (on a GPU too: the CPU's chains, no tensor "
      "cores), so a sequence's log-probs are the same bits in any batch and equal the trainer's when their dtypes "
      "and devices agree; false: the engine decodes through OpenBLAS (cuBLAS on a GPU, where the trainer follows "
      "this key too), whose sum order depends on the batch (the fastest kernels on GPUs; on this CPU see "
      "bench/RESULTS.md)");
  }
};

// The mismatch figures of every step (rollout_corr/*, trainer/rollout_corr_metrics.h).
struct MismatchSection {
  double ratio_bound = 2.0;
  int64_t full_vocab_samples = 8;

  template <class V> void visit(V& v) {
    v("ratio_bound", ratio_bound,
      "rollout_corr/ratio_outside_frac counts the tokens whose ratio exp(trainer - rollout) is outside "
      "[1/ratio_bound, ratio_bound]");
    v("full_vocab_samples", full_vocab_samples,
      "mixed numerics: rollout_corr/full_kl and full_tv (KL and total variation between the two numerics' whole "
      "next-token distributions) on this many of each step's samples; 0 = off");
  }
};

// The async pipeline (loop/rollout_pipeline.h): the rollout of step k + max_staleness runs while step k updates,
// with the policy the engine holds then, so a step trains on samples max_staleness versions old.
struct AsyncSection {
  int64_t max_staleness = 0;

  template <class V> void visit(V& v) {
    v("max_staleness", max_staleness,
      "0: synchronous (each step samples with the policy it updates); N >= 1: the rollout of step k + N overlaps "
      "the update of step k, so every step trains on samples exactly N policy versions old (fewer in the first N "
      "steps); a sample older than N (a checkpoint's pending rollout resumed under a lower bound) is dropped and "
      "counted. Which samples enter a step never depends on timing: the same seed gives the same run");
  }
};

struct TrainConfig {
  std::string run_dir = "runs/grpo_add3";
  std::string model_preset = "tiny";  // random init when neither init_checkpoint nor warm_start is given
  std::string init_checkpoint;
  std::string tokenizer;  // "" = init_checkpoint's (or the warm start's) tokenizer.json, else the character tokenizer
  WarmStartSection warm_start;
  uint64_t seed = 1;
  std::string device = "cpu";  // where the trainer runs (and the rollout, unless rollout.device says otherwise)
  TaskConfig task;
  ChatOptions chat;
  AgentConfig agent;
  RewardConfig reward;
  RolloutSection rollout;
  TrainerSection trainer;
  NumericsSection numerics;
  MismatchSection mismatch;
  AlgorithmConfig algorithm;
  CriticSection critic;
  PpoEpochsConfig ppo;
  OptimConfig optim;
  FilterGroupsConfig filter_groups;
  ProbeConfig probe;
  AsyncSection async;
  int64_t steps = 200;
  int64_t eval_every = 20;  // steps; 0 = only at the end
  int64_t eval_size = 1000;
  int64_t checkpoint_every = 0;  // steps; 0 = only at the end
  int64_t checkpoint_keep_last = 0;  // newest step checkpoints kept; 0 = all
  int64_t samples_per_step = 4;  // lines of samples.jsonl per step
  int64_t log_every = 1;
  LoggingConfig logging;

  TrainConfig();
  void validate() const;
  // Samples of a step's update batch as planned: prompts_per_step x group_size, or filter_groups.max_groups
  // groups when set (a filtered step may train on fewer).
  int64_t update_batch_size() const;
  // The most episodes a harness (agent.env "http") may be playing at once, each with a request waiting in the
  // server: a draw's, or those of the draws an episode may span (agent.turns_per_draw, agent.tokens_per_draw).
  int64_t harness_sessions_at_once() const;
  // Optimizer steps of the whole run, for the LR schedule: steps x epochs x mini-batches of the planned update
  // batch (with filter_groups a step may train on fewer samples).
  int64_t run_optimizer_steps() const;
  // Data parallelism over `ranks` ranks (loop/data_parallel_step.h): a mini-batch's micro-batches are shared out
  // among the ranks, so a mini-batch must hold at least `ranks` of them; the error names ppo.micro_batch_size.
  void check_data_parallel(int ranks) const;
  // Each role's numerics (model/numerics.h) from rollout.dtype / rollout.quantization / trainer.dtype /
  // numerics.batch_invariant; errors name the key.
  ModelNumerics rollout_numerics() const;
  ModelNumerics trainer_numerics() const;
  // Each role's numerics where it runs (model/numerics.h check_numerics_device: tf32 only on a CUDA device with
  // numerics.batch_invariant false); a remote worker checks its own --device. Part of validate(), without its
  // check that the devices are present.
  void check_numerics_devices() const;
  // rollout.device, or the run's device when it is "".
  std::string rollout_device() const { return rollout.device.empty() ? device : rollout.device; }
  // The policy's model config as the run will start it — init_checkpoint's config.json, else the warm start's
  // or the run's preset — read without loading any weights, so validate() can check the sampling and engine
  // keys against it before any work.
  ModelConfig policy_model_config() const;
  // The tokenizer the run uses (tokenizer/hf_tokenizer.h choose_tokenizer): tokenizer, else init_checkpoint's, else
  // the warm start's; "" = the character tokenizer.
  std::string tokenizer_path() const;
  template <class V> void visit(V& v) {
    v("run_dir", run_dir, "output directory; when it holds a run already, NAME-2, NAME-3, ... is used");
    v("model_preset", model_preset,
      "random init preset (tiny | tiny-long | tiny-ctx256 | qwen05b | qwen-tiny) without init_checkpoint or warm start");
    v("init_checkpoint", init_checkpoint, "checkpoint directory to start from");
    v("tokenizer", tokenizer, "a tokenizer.json or a directory holding one; \"\" = init_checkpoint's tokenizer.json when it has one, else the character tokenizer");
    v("warm_start", warm_start, "SFT warm start before RL");
    v("seed", seed, "seeds weights (random init), sampling, data order and mini-batch shuffles");
    v("device", device,
      "where the trainer runs: cpu, cuda or cuda:N (master weights, gradients and AdamW moments there, every "
      "forward, backward and optimizer step of the policy and critic, the old and reference log-probs and the "
      "probe; the SFT warm start stays on the CPU); the rollout engine too unless rollout.device is set");
    v("task", task, "the task (prompts and scorer)");
    v("chat", chat, "prompts as chat turns of the tokenizer's chat template (the SFT warm start uses the same)");
    v("agent", agent,
      "multi-turn episodes with an environment and tools instead of one response per prompt (agent/README.md); "
      "the SFT warm start then trains on the environment's demonstrations");
    v("reward", reward, "local scorer or a reward server");
    v("rollout", rollout, "rollout batch, sampling, numerics and engine");
    v("trainer", trainer, "the trainer's numerics");
    v("numerics", numerics, "numerics shared by both roles");
    v("mismatch", mismatch, "the rollout/trainer mismatch figures of each step");
    v("algorithm", algorithm,
      "the algorithm (name: grpo | gspo | cispo | reinforce_pp | reinforce_pp_baseline | ppo | dpo; it sets the "
      "defaults of the other algorithm.* keys), advantage estimator (grpo, drgrpo, rloo; gae for ppo), policy "
      "loss, PPO value loss, DPO beta");
    v("critic", critic, "ppo: the critic's optimizer");
    v("ppo", ppo,
      "epochs and mini-batches over each rollout batch (actor and critic). dpo: a mini-batch holds the pairs of "
      "mini_batch_size / group_size prompt groups (0 = every pair of the step), micro_batch_size sequences = "
      "micro_batch_size / 2 pairs per forward/backward");
    v("optim", optim, "AdamW and the LR schedule");
    v("filter_groups", filter_groups, "GRPO dynamic sampling: train only on groups with a reward spread");
    v("probe", probe, "consistency probe after each weight sync");
    v("async", async, "overlap of rollout and update (an off-policy pipeline with a staleness bound)");
    v("steps", steps, "RL steps (one rollout batch each)");
    v("eval_every", eval_every, "held-out evaluation period in steps (0 = at the end only)");
    v("eval_size", eval_size, "held-out problems per evaluation (greedy)");
    v("checkpoint_every", checkpoint_every, "checkpoint period in steps (0 = at the end only)");
    v("checkpoint_keep_last", checkpoint_keep_last,
      "keep only the newest N step checkpoints, deleting older ones after each save (0 = keep all)");
    v("samples_per_step", samples_per_step, "samples written to samples.jsonl per step");
    v("log_every", log_every, "step line period");
    v("logging", logging, "metrics sinks besides metrics.jsonl");
  }
};

// Fills `cfg` from `j` like the generic config_from_json, except that `algorithm` starts from
// algorithm_defaults(j["algorithm"]["name"]) (default "grpo"). Errors name the key path.
void config_from_json(const Json& j, TrainConfig& cfg);

}  // namespace rlcpp
