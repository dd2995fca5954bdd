// The rollout engine: requests in, samples out. Each step the Scheduler picks the batch (continuous
// batching over a paged KV cache with shared group prefixes), the engine flattens it into one CachedStep
// (nano-vllm's model_runner: tokens, positions, slot mapping, CSR block tables), runs the copy-on-write block
// copies and ONE Transformer::forward_cached over prefill and decode rows together, samples every sequence's
// next token and retires finished sequences at once. The step's context is a local of generate(), never
// global state.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "core/exec_context.h"
#include "core/metrics.h"
#include "core/tensor.h"
#include "model/kv_cache.h"
#include "model/lora_unmerged.h"
#include "model/transformer.h"
#include "rollout/block_manager.h"
#include "rollout/request.h"
#include "rollout/sampler.h"
#include "rollout/scheduler.h"
#include "rollout/session.h"

namespace rlcpp {

struct EngineConfig {
  int64_t block_size = 16;
  int64_t num_blocks = 0;  // 0 = room for max_num_seqs full-context sequences, capped by max_kv_cache_mib
  int64_t max_kv_cache_mib = 4096;
  int64_t max_num_seqs = 512;
  int64_t max_num_batched_tokens = 8192;  // must be >= the engine's context, so any one prefill fits
  int64_t max_context = 0;  // tokens a sequence may reach (prompt + response); 0 = the model's context
  // Static batching instead of continuous (rollout/scheduler.h), for `rlcpp bench rollout`'s comparison; not a
  // config key: a run always batches continuously.
  bool static_batching = false;
  // The prefix cache (rollout/block_manager.h): full blocks of K/V found again by their tokens, across
  // requests. Not a key of this struct: `rollout.prefix_cache` sets it for a run, `--prefix-cache` for a
  // command.
  bool prefix_cache = true;

  template <class V> void visit(V& v) {
    v("block_size", block_size, "tokens per KV-cache block");
    v("num_blocks", num_blocks, "KV-cache blocks (0 = enough for max_num_seqs full-context sequences, capped)");
    v("max_kv_cache_mib", max_kv_cache_mib, "cap on the automatic KV-cache size (MiB)");
    v("max_num_seqs", max_num_seqs, "sequences decoded together (the batch limit)");
    v("max_num_batched_tokens", max_num_batched_tokens,
      "rows per forward: decode rows + prefill tokens (at least the context, so any one prefill fits)");
    v("max_context", max_context,
      "tokens a sequence may reach, prompt and response, at most the model's max_position_embeddings (0 = that): "
      "the KV cache's blocks per sequence, max_num_batched_tokens' floor and the RoPE table follow it, a longer "
      "prompt is refused and a sequence stops there (finish_reason length)");
  }
};
// The engine config's checks against the model it serves (block_size, num_blocks, limits; max_context within the
// model's context; max_num_batched_tokens >= the engine's context), as the Engine makes them: a run checks its
// config with them before any work.
void validate_engine_config(const EngineConfig& config, const ModelConfig& model);
// `model` as an engine of `config` serves it: its context (max_position_embeddings) capped at config.max_context.
// Build the engine's Transformer from it, so that the RoPE table (a row per position) follows the cap too; the
// weights' layout does not depend on the context.
ModelConfig engine_model_config(const ModelConfig& model, const EngineConfig& config);


// One sampled token of a step.
struct SampledRow {
  int64_t sequence_id = 0;  // index of its Sample in the result
  Sequence* sequence = nullptr;
  int32_t logits_row = 0;   // row of the step's logits it was drawn from
  int32_t position = 0;     // position of the sampled token in its sequence
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // the sequence's num_top_logprobs most likely tokens (none when 0)
};

// What one step did, shown to an observer after the step (finished sequences already released).
struct StepView {
  int64_t step = 0;
  const ScheduledBatch& batch;
  const CachedStep& cached;
  const Tensor& logits;  // (cached.logits_rows.size(), V), untempered, on the host
  const std::vector<SampledRow>& sampled;
  const Scheduler& scheduler;
  const BlockManager& blocks;
};
// Runs between steps on generate's thread: tests check invariants and logits, the worker sends heartbeats
// and checks for shutdown (an exception thrown here aborts the request), weight sync may call set_weights.
using StepObserver = std::function<void(const StepView&)>;

class Engine {
 public:
  // `params` (host memory) must outlive the engine (or the next set_weights). The engine's steps run on
  // `context`: on a CUDA context its KV cache lives on that device and it decodes from a copy of the weights
  // prepared there per policy version (Transformer::prepare_decode_weights), each step's logits copied back to
  // the host for the one sampler.
  Engine(const Transformer& model, const ParameterStore& params, const EngineConfig& config,
         int64_t policy_version = 0, const ExecContext& context = ExecContext::cpu());

  // Samples request.n completions of every prompt; samples come back prompt-major.
  RolloutResult generate(const Request& request, const StepObserver& observer = {});

  // For a caller that adds and removes sequences between steps (rlcpp serve's loop): a Scheduler over the
  // engine's blocks (idle sessions among them, evicted before a running sequence is preempted), whose sequences
  // each name their sampling parameters (Sequence::sampling). step runs one step of its batch: schedule,
  // forward, sample, finish; finished sequences are released at once. Returns the step's sampled rows (valid
  // until the next step), each with its sequence; `clock` times the sequences' first token and finish.
  // Counters add up in `stats`.
  Scheduler new_scheduler();
  const std::vector<SampledRow>& step(Scheduler& scheduler, RolloutStats& stats, const Stopwatch& clock);
  BlockManager& blocks() { return blocks_; }
  const BlockManager& blocks() const { return blocks_; }
  // Sessions (rollout/session.h, rollout/README.md "Sessions"): sequences the engine keeps, K/V blocks and all,
  // between turns. Ids are the engine's, never reused. Errors name the session.
  int64_t open_session(const SessionSpec& spec);
  // Tokens of known origin (an observation) appended between turns: the next turn prefills only them.
  void append(int64_t session, std::span<const int32_t> tokens);
  // Runs one turn of each listed session (each at most once), batched continuously; results in the order asked.
  // `stats` (optional) receives the call's counters.
  std::vector<TurnResult> run_turns(const std::vector<TurnRequest>& turns, const StepObserver& observer = {},
                                    RolloutStats* stats = nullptr);
  // Frees the session's blocks and forgets it.
  void close_session(int64_t session);
  // Closes every session idle (no turn running) for at least `max_idle_s` seconds; returns their ids.
  std::vector<int64_t> close_idle_sessions(double max_idle_s);
  bool has_session(int64_t session) const { return sessions_.count(session) > 0; }
  SessionView session(int64_t session) const;
  int64_t num_sessions() const { return static_cast<int64_t>(sessions_.size()); }
  // KV-cache blocks held by sessions between turns (and free), for memory reports and tests.
  int64_t num_free_blocks() const { return blocks_.num_free(); }

  // New weights for the following steps; their tokens carry `version`. The engine decodes from a packed copy
  // of the weights (PackedWeights), repacked before the next step after every call: a trainer that updates
  // the engine's buffer in place (colocated) must call set_weights with the new version before the engine
  // sees the change. Weights holding a NaN or an infinity are refused with an error naming the tensor, the
  // engine's version and packed weights left as they were.
  void set_weights(const ParameterStore& params, int64_t version);
  // New weights that become the engine's own (a worker's received version, a served checkpoint): the caller
  // keeps no other copy of `params` (copies share the buffer). They are prepared at once, self-contained where
  // the numerics allow (Transformer::prepare_decode_weights: the panels, the embedding table in the compute dtype,
  // the norms), and the fp32 store is released: a bf16 engine then holds its weights in bf16. The fp32 OpenBLAS
  // decode multiplies by the store itself and keeps it. Refused as set_weights refuses.
  void take_weights(ParameterStore params, int64_t version);
  // A copy of `params` made the engine's own, for a caller that goes on updating its buffer (the async
  // pipeline's trainer): the weights are prepared from `params` at once and kept apart from it, self-contained
  // where the numerics allow; otherwise (the OpenBLAS decode) the engine keeps a copy of the store. `params`
  // may change as soon as this returns. Refused as set_weights refuses.
  void take_copy_of(const ParameterStore& params, int64_t version);
  // LoRA adapters the decode applies unmerged beside its weights (model/lora_unmerged.h; a LoRA run with
  // rollout.lora_merge false): from now on, tokens carry `version`. The weights stay as prepared (nothing is
  // repacked); no K/V computed before is found again. Null: no adapters. Host engines only.
  void set_adapters(std::shared_ptr<const UnmergedLora> adapters, int64_t version);
  const UnmergedLora* adapters() const { return adapters_.get(); }
  // The bytes of weights the engine holds or reads: its prepared weights, and the parameters while it reads them
  // (and unmerged adapters).
  int64_t weight_bytes() const;
  int64_t policy_version() const { return policy_version_; }

  const EngineConfig& config() const { return config_; }
  // The model as the engine serves it: its context capped at config().max_context (engine_model_config).
  const ModelConfig& model_config() const { return served_; }
  const ModelNumerics& numerics() const { return model_.numerics(); }
  int64_t num_blocks() const { return cache_.num_blocks; }
  // The cache's bytes over its slots: 2 * layers * kv_heads * head_dim * 4 (fp32) or 2 (bf16, fp16).
  int64_t kv_bytes_per_token() const;
  int64_t kv_cache_bytes() const { return cache_.bytes(); }
  // Where the engine's steps run and allocate: its step buffers, KV cache and logits come from this context's
  // pool.
  const ExecContext& context() const { return context_; }

 private:
  // schedule, forward, sample, finish; returns the step's logits on the host (for an observer).
  Tensor run_step(Scheduler& scheduler, RolloutStats& stats, const Stopwatch& clock);
  // The model_runner part: flattens the batch into step_, recording which sequences sample from each row.
  void build_step(const ScheduledBatch& batch, const BlockManager& blocks);
  void copy_blocks(const std::vector<BlockCopy>& copies);
  void sample_rows(const Tensor& logits);
  // The step's logits on the host: themselves, or copied from the engine's device into host_logits_.
  Tensor host_logits(const Tensor& logits);
  // A device engine: each sampled token's log-prob ("full" space) recomputed from the device logits by the
  // device's logprob_forward (the bits a trainer on that device computes).
  void rescore_on_device(const Tensor& logits);
  // The prefix cache's salt for the weights in use: policy version, numerics and the set_weights count.
  uint64_t cache_salt() const;
  // A turn's two halves around run_turns' scheduler: begin_turn readies the session's sequence (K/V of an older
  // version let go, the turn's sampling set); end_turn, once the turn has finished, gives its result.
  Sequence& begin_turn(const TurnRequest& turn);
  TurnResult end_turn(int64_t session);
  // Runs steps until the scheduler has no work: the loop generate and run_turns share. `clock` times the call.
  void drive(Scheduler& scheduler, RolloutStats& stats, const StepObserver& observer, const Stopwatch& clock);
  // A session's state between calls.
  struct Session {
    std::vector<int32_t> prompt;
    std::unique_ptr<Sequence> sequence;
    SamplingParams sampling;  // of its current turn (Sequence::sampling points here)
    int64_t kv_version = -1;
    std::chrono::steady_clock::time_point idle_since;
    int64_t kv_rows_before = 0, recomputed_before = 0;  // at its current turn's start
  };
  Session& find_session(int64_t session, const char* what);

  const Transformer& model_;
  const ParameterStore* params_;  // the weights the decode reads (&owned_ after take_weights)
  ParameterStore owned_;          // take_weights' store, while the prepared weights need it (else empty)
  EngineConfig config_;
  ModelConfig served_;  // engine_model_config(model_.config(), config_)
  ExecContext context_;
  int64_t policy_version_;
  KVCache cache_;
  // Over cache_'s blocks, for the engine's life: a call's sequences, the sessions between turns, and the
  // prefix cache's blocks, which outlive requests.
  BlockManager blocks_;
  int64_t weights_epoch_ = 0;  // set_weights calls so far (part of the cache salt)
  std::map<int64_t, std::unique_ptr<Session>> sessions_;
  std::deque<Sequence*> parked_;  // sessions between turns holding blocks, least recently used first
  int64_t next_session_ = 0;
  std::shared_ptr<const UnmergedLora> adapters_;  // applied unmerged by the decode (set_adapters), or null
  PackedWeights packed_;       // *params_ prepared for forward_cached in the model's numerics, on context_'s device
  bool packed_stale_ = true;  // repack before the next step (construction, set_weights)
  Tensor host_logits_;        // a device engine's logits copied back for the sampler (rows for the largest step)
  // Reused across steps so a step allocates little.
  ScheduledBatch batch_;
  CachedStep step_;
  std::vector<SampledRow> sampled_;
  std::vector<Sampler> samplers_;  // one per OpenMP thread
};

}  // namespace rlcpp
