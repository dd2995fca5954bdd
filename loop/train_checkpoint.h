// A resumable train checkpoint, RUN_DIR/checkpoints/step_N/:
//   config.json + model.safetensors   the policy (Hugging Face layout, model/checkpoint.h)
//   trainer_state.safetensors         AdamW exp_avg and exp_avg_sq (flat, parameter layout order)
//   state.json                        step, policy version, optimizer step counts, RNG stream positions
//   pending_rollouts.json             async pipeline only: the draws of later steps made before this one ended
//   adapter/                          LoRA only (trainer.lora): the adapters as PEFT saves them (model/lora.h);
//                                     model.safetensors is then the merged model, trainer_state the adapters'
//   episodes_in_flight.json           agent.turns_per_draw only: the episodes of groups that run on into later
//                                     draws (loop/agent_rollout.h)
//   critic/                           PPO only: the critic (config.json + model.safetensors, Hugging Face
//                                     *ForTokenClassification) and its trainer_state.safetensors
// Everything is written into step_N.partial and renamed to step_N last, so a crash leaves no step_N that
// resuming could mistake for complete.
//
// The frozen reference policy (a KL term, DPO) does not change during a run, so it is saved once, before the
// first step, as RUN_DIR/checkpoints/reference/ (config.json + model.safetensors, written to a temporary name
// and renamed by save_model_checkpoint); a step checkpoint exists only after it.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/philox.h"
#include "model/adamw.h"
#include "model/lora.h"
#include "model/parameters.h"

namespace rlcpp {

struct TrainState {
  int64_t step = 0;            // steps completed
  int64_t policy_version = 0;  // version the policy holds after `step`
  PhiloxStream* data_rng = nullptr;
  PhiloxStream* update_rng = nullptr;
  Json run_config;  // the resolved run config the state was reached under (null: not recorded)
  Json pending_rollouts;  // the async pipeline's pending draws (loop/rollout_pipeline.h); null: none
  Json episodes_in_flight;  // an agent run's episodes still running (loop/agent_rollout.h); null: none
  LoraAdapters* adapters = nullptr;  // a LoRA run's adapters: saved to and loaded from DIR/adapter
};

inline constexpr const char* kPendingRolloutsFile = "pending_rollouts.json";
inline constexpr const char* kEpisodesInFlightFile = "episodes_in_flight.json";
inline constexpr const char* kAdapterDir = "adapter";

// The PPO critic's part of a checkpoint: its weights and its optimizer.
struct CriticState {
  ParameterStore& params;
  AdamW& optimizer;
};

// `critic` null: a run without a critic (no critic/ directory).
// `extra_files` (a tokenizer's) are copied in beside the weights.
// write_train_checkpoint then commit_train_checkpoint: between the two, the caller writes what must exist whenever
// the checkpoint does (rlcpp train: the step's metrics and samples).
void save_train_checkpoint(const std::string& dir, const ParameterStore& params, AdamW& optimizer,
                           const TrainState& state, const CriticState* critic = nullptr,
                           const std::vector<std::string>& extra_files = {});
// Everything into DIR.partial (removed again when a write fails): no DIR that resuming could take yet.
void write_train_checkpoint(const std::string& dir, const ParameterStore& params, AdamW& optimizer,
                            const TrainState& state, const CriticState* critic = nullptr,
                            const std::vector<std::string>& extra_files = {});
// Renames DIR.partial to DIR (replacing a DIR left by an earlier run of the same step): the checkpoint is complete.
void commit_train_checkpoint(const std::string& dir);

// Loads the policy into `params` (same layout), the optimizer moments and step count into `optimizer`, the
// RNG positions into state's streams; returns step and version in `state`. With `critic`, the critic's
// weights and optimizer too (the checkpoint must hold them). Errors name the file.
void load_train_checkpoint(const std::string& dir, ParameterStore& params, AdamW& optimizer, TrainState& state,
                           const CriticState* critic = nullptr);

// The run config a checkpoint's state was reached under (state.json "run_config"; null for a checkpoint that
// predates it): what resuming compares the run's config.json with.
Json checkpoint_run_config(const std::string& dir);

// Removes what interrupted checkpoint writes left in RUN_DIR/checkpoints (step_N.partial, *.tmp-*, *.old-*):
// called at the start of a run that holds the directory's lock, so nothing there belongs to a live writer.
void remove_unfinished_checkpoints(const std::string& run_dir);
// Deletes all but the newest `keep_last` step_N checkpoints (0: keeps all); `pinned` (a split run's worker
// restarts from its first checkpoint), the reference and anything not named step_N stay.
void prune_checkpoints(const std::string& run_dir, int64_t keep_last, const std::string& pinned);

// RUN_DIR/checkpoints/reference
std::string reference_checkpoint_dir(const std::string& run_dir);
// Saves `reference` there once (replacing nothing: an existing one is an error).
void save_reference_checkpoint(const std::string& run_dir, const ParameterStore& reference);
// The saved reference; the error names the directory and says why it is needed.
ParameterStore load_reference_checkpoint(const std::string& run_dir);

}  // namespace rlcpp
