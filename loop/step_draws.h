// A step's rollout side, phases 1 (rollout) and 2 (reward): the prompt groups a step trains on. One draw of
// rollout.prompts_per_step fresh problems, or with refilled dynamic sampling (filter_groups.max_draws > 1) more
// draws, each with its own sampling seed, until filter_groups.max_groups groups have a reward spread or the cap.
// The synchronous loop draws a step's groups in the step; the async pipeline (loop/rollout_pipeline.h) draws
// them steps ahead on another thread and keeps the pending ones in checkpoints (step_draws_to_json).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/philox.h"
#include "loop/agent_rollout.h"
#include "loop/rollout_backend.h"
#include "loop/train_config.h"
#include "tokenizer/tokenizer.h"
#include "reward/reward_function.h"
#include "reward/task.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

// Prompt groups drawn and scored: sample i of rollout.samples is samples[i] to the trainer, scored rewards[i]. An
// agent run's draw (loop/agent_rollout.h) also holds each sample's episode and the draw's agent/* figures.
struct Draw {
  std::vector<Problem> problems;
  RolloutResult rollout;
  std::vector<RolloutSample> samples;
  std::vector<RewardResult> rewards;
  std::vector<Episode> episodes;
  std::map<std::string, double> agent_metrics;
};

struct StepDraws {
  int64_t step = 0;
  int64_t policy_version = 0;  // the policy the engine sampled every draw with
  Draw drawn;                  // the step's draws, appended in order (prompt indices run on)
  int64_t draws = 1;
  bool cap_reached = false;    // refilling stopped at max_draws short of max_groups informative groups
  double rollout_s = 0, env_s = 0, reward_s = 0;  // wall seconds of phases rollout, env and reward (timing only)
};

// What drawing reads and advances: nothing the trainer's update touches, so a draw may run on another thread
// while the trainer updates (the backend and the data stream are then the draw's alone).
struct DrawContext {
  const TrainConfig& config;
  const Task& task;
  RewardFunction& reward;
  const Tokenizer& tokenizer;
  RolloutBackend& rollout;
  PhiloxStream& data_rng;
  AgentRollout* agent = nullptr;  // an agent run's episodes (agent.env set), else one prompt -> one response
};

// The draws of step `step` by an engine that holds policy `version` (every sample must carry it).
StepDraws draw_step(const DrawContext& ctx, int64_t step, int64_t version);

// A pending step's draws as JSON (exact: floats and ids round-trip), and back; errors name `where` and the key.
Json step_draws_to_json(const StepDraws& d);
StepDraws step_draws_from_json(const Json& j, const std::string& where);

}  // namespace rlcpp
