// A step's draw when the run plays episodes (agent.env set; agent/README.md): phases 1 (rollout, with the env phase
// apart) and 2 (the episodes' returns are the rewards). rollout.prompts_per_step task items, rollout.group_size
// episodes each (a GRPO group), run by the placement's engine sessions (loop/engine_turns.h). Each episode becomes
// one trainer sample: its prompt, then every later token as the engine holds it, the loss mask 1 on the model's
// tokens and 0 on the environment's (agent.tokenization "tito"; "retokenize" re-renders the conversation as
// frameworks did, agent/retokenize.h). With agent.turns_per_draw > 0 a group whose episodes have not all ended
// runs on in the next draw (in_flight), with the policy synced then.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/env_maker.h"
#include "agent/episode.h"
#include "agent/turn_protocol.h"
#include "loop/harness_rollout.h"
#include "loop/rollout_backend.h"
#include "loop/train_config.h"
#include "tokenizer/tokenizer.h"
#include "reward/reward_result.h"
#include "reward/task.h"
#include "trainer/rollout_batch.h"

namespace rlcpp {

// Episodes drawn and ended: what a step trains on, as Draw (loop/step_draws.h) holds it.
struct EpisodeDraw {
  std::vector<Problem> problems;           // one per group
  RolloutResult rollout;                   // one Sample per episode (tokens after the prompt, log-probs, versions)
  std::vector<RolloutSample> samples;      // the trainer's view
  std::vector<RewardResult> rewards;       // the returns
  std::vector<Episode> episodes;           // in sample order
  std::map<std::string, double> metrics;   // agent/* of the draw
  double env_s = 0;                        // the environments' wall time (within the draw's)
};

class AgentRollout {
 public:
  // `config`, `task` and `tokenizer` must outlive it.
  AgentRollout(const TrainConfig& config, const Task& task, const Tokenizer& tokenizer);
  ~AgentRollout();

  // The draw of step `step` by `backend`'s engine at `version`: fresh groups from `data_rng` (sampling seed
  // `seed`) and the episodes in flight; groups whose episodes all ended, in the order drawn.
  EpisodeDraw draw(RolloutBackend& backend, PhiloxStream& data_rng, int64_t step, uint64_t seed, int64_t version);

  // The episodes in flight (agent.turns_per_draw), as a checkpoint keeps them (null when none), and back: a
  // restored episode's environment replays its turns. A harness's episodes cannot be restored (their state is the
  // harness's): a run's scheduled checkpoints hold none (loop/harness_rollout.h); one written when the run was
  // stopped may, and their groups are left out of the resumed run (with a note on stderr).
  Json in_flight_to_json() const;
  void restore_in_flight(const Json& saved, const std::string& where);
  int64_t in_flight() const { return static_cast<int64_t>(in_flight_.size()); }

  const TurnProtocol& protocol() const { return *protocol_; }
  const EnvMaker& envs() const { return *envs_; }

 private:
  const TrainConfig& config_;
  const Task& task_;
  const Tokenizer& tokenizer_;
  std::unique_ptr<TurnProtocol> protocol_;
  std::unique_ptr<EnvMaker> envs_;
  std::vector<Episode> in_flight_;  // whole groups, in the order drawn
  // A harness whose episodes span syncs (agent.spans_draws()): one for the run, started at its first draw.
  std::unique_ptr<HarnessRun> harness_run_;
  int64_t served_vocab_size_ = 0;  // harness mode: the served model's (read at the first draw)
  // Whether a harness's draw for `step` lets every episode run to its end: no harness episode is in flight when
  // a scheduled checkpoint is written (at the step that trains on this draw) or the run ends.
  bool harness_draw_ends_episodes(int64_t step) const;
};

// An episode as the trainer's sample (tito) and the engine's Sample; `prompt_index`: its group in the draw;
// `scoring`: the distribution its turns' log-probs are of (SamplingParams::scoring of the turns' sampling).
RolloutSample episode_sample(const Episode& episode, const LogprobScoring& scoring);
Sample episode_engine_sample(const Episode& episode, int64_t prompt_index, const LogprobScoring& scoring);
// Its return as a reward (components: turns, tool_calls, tool_errors, env_tokens, truncated, success).
RewardResult episode_reward(const Episode& episode);
// agent/* over `episodes`: turns_mean, tool_calls, tool_errors, tool_success, env_tokens, truncated, success,
// env_failures, prefilled_tokens, recomputed_tokens, episodes.
std::map<std::string, double> agent_metrics(const std::vector<Episode>& episodes);

}  // namespace rlcpp
