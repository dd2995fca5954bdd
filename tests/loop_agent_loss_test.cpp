// Issue 34 "Loss masks": an episode of several turns (the model's tokens, an observation appended, the model
// again) becomes a trainer sample (episode_sample, loop/agent_rollout.h) whose loss mask is 1 on exactly the
// model's tokens; through GRPO's normal path (group advantages, old and reference log-probs, PPO-clip over
// micro-batches) it trains exactly as one hand-built sequence of the same ids with the observations masked; the
// episode's advantage reaches every assistant token of every turn; an observation token's loss inputs change
// nothing, an assistant token's do.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "agent/episode.h"
#include "core/phase_timer.h"
#include "kernels/ops.h"
#include "loop/agent_rollout.h"
#include "model/init.h"
#include "tests/host_context.h"
#include "tests/trainer_test_support.h"
#include "trainer/algorithm.h"

namespace rlcpp {
namespace {

using testing::host;
using test::same_bytes;
using test::small_model_config;

constexpr int64_t kGroups = 2, kGroupSize = 3;
constexpr int64_t kMicro = 2;  // 3 micro-batches of 2 episodes

// One piece of an episode after its prompt: a turn the model sampled, or an observation the environment appended.
struct Piece {
  TokenSource source;
  std::vector<int32_t> ids;
  std::vector<float> logps;  // the engine's, for the model's tokens
};

struct EpisodeScript {
  std::vector<int32_t> prompt;
  std::vector<Piece> pieces;
  double reward = 0;
};

// Episodes of 2 or 3 assistant turns with observations of 1..3 tokens between them (ids 3..31 of the small
// model's vocabulary, engine log-probs in [-3, -0.1]), rewards spread within each group.
std::vector<EpisodeScript> scripted_episodes() {
  PhiloxStream rng(31, 0);
  const auto ids = [&](int64_t n) {
    std::vector<int32_t> v;
    for (int64_t t = 0; t < n; ++t) v.push_back(3 + static_cast<int32_t>(rng.below(29)));
    return v;
  };
  std::vector<EpisodeScript> out;
  for (int64_t i = 0; i < kGroups * kGroupSize; ++i) {
    EpisodeScript e;
    e.prompt = ids(3);
    e.prompt.insert(e.prompt.begin(), 1);  // BOS
    const int64_t turns = 2 + static_cast<int64_t>(rng.below(2));
    for (int64_t t = 0; t < turns; ++t) {
      if (t > 0) e.pieces.push_back({TokenSource::kEnvironment, ids(1 + static_cast<int64_t>(rng.below(3))), {}});
      Piece turn{TokenSource::kModel, ids(2 + static_cast<int64_t>(rng.below(2))), {}};
      for (size_t k = 0; k < turn.ids.size(); ++k) turn.logps.push_back(-0.1f - 2.9f * rng.uniform());
      e.pieces.push_back(std::move(turn));
    }
    e.reward = static_cast<double>(i % kGroupSize) + 0.5 * rng.uniform();
    out.push_back(std::move(e));
  }
  return out;
}

// As the episode runner records it, and the trainer's sample of it.
RolloutSample sample_of_episode(const EpisodeScript& script) {
  Episode e;
  e.prompt = script.prompt;
  for (const Piece& p : script.pieces) {
    if (p.source == TokenSource::kModel)
      e.add_model_tokens(p.ids, p.logps, /*version=*/0, /*ended=*/true);
    else
      e.add_environment_tokens(p.ids);
  }
  return episode_sample(e, LogprobScoring{});
}

// The same ids as one single-turn sequence written by hand: everything after the prompt is the response, the
// observations masked out.
RolloutSample hand_built_sample(const EpisodeScript& script) {
  RolloutSample s;
  s.prompt = script.prompt;
  for (const Piece& p : script.pieces)
    for (size_t k = 0; k < p.ids.size(); ++k) {
      const bool model = p.source == TokenSource::kModel;
      s.response.push_back(p.ids[k]);
      s.mask.push_back(model ? 1.0f : 0.0f);
      s.rollout_logp.push_back(model ? p.logps[k] : 0.0f);
    }
  return s;
}

// GRPO with every loss input in play: a KL to a reference, truncated IS against the engine's log-probs.
AlgorithmConfig grpo_config() {
  AlgorithmConfig algo;
  find_algorithm("grpo").set_defaults(algo);
  algo.policy_loss.kl_coef = 0.1;
  algo.policy_loss.tis_cap = 2.0;
  return algo;
}

struct Trained {
  ScoredBatch batch;  // its samples as the update saw them (old and reference log-probs, advantages)
  ParameterStore grads;
  double loss = 0;
};

// One optimizer step of the small model (seed 20) on `batch`: with `advantages_given`, the policy update alone
// on the batch's own advantages; otherwise the trainer's normal path: old log-probs of the policy, reference
// log-probs (seed 21), then GRPO's group advantages and update.
Trained train_step(ScoredBatch batch, bool advantages_given) {
  const ModelConfig mc = small_model_config();
  const Transformer model(mc);
  ParameterStore params = init_random(mc, 20);
  if (!advantages_given) {
    const ParameterStore reference = init_random(mc, 21);
    const auto old_logp = compute_response_logp(host(), model, params, batch.samples, kMicro, 1.0f);
    const auto ref_logp = compute_response_logp(host(), model, reference, batch.samples, kMicro, 1.0f);
    for (size_t i = 0; i < batch.samples.size(); ++i) {
      batch.samples[i].old_logp = old_logp[i];
      batch.samples[i].ref_logp = ref_logp[i];
    }
  }
  OptimConfig optim;
  optim.grad_clip = 0;  // the raw accumulated gradient
  PolicyUpdater actor(model, params, optim);
  const AlgorithmConfig algo = grpo_config();
  PpoEpochsConfig plan;
  plan.micro_batch_size = kMicro;
  plan.mini_batch_size = 0;  // one optimizer step over the whole batch
  plan.shuffle = false;
  PhiloxStream rng(1, 0);
  UpdateContext ctx{algo, plan, kGroupSize, 1, actor, nullptr, nullptr, rng};
  PhaseTimer timer;
  StepMetrics metrics;
  if (advantages_given)
    policy_update(ctx, batch, timer, metrics);
  else
    find_algorithm("grpo").update(ctx, batch, timer, metrics);
  return {std::move(batch), actor.grads().clone(), metrics.at("actor/pg_loss")};
}

ScoredBatch batch_of(std::vector<RolloutSample> samples, const std::vector<EpisodeScript>& scripts) {
  ScoredBatch b;
  b.samples = std::move(samples);
  for (size_t i = 0; i < scripts.size(); ++i) {
    b.scores.push_back(static_cast<float>(scripts[i].reward));
    b.group_ids.push_back(static_cast<int64_t>(i) / kGroupSize);
    b.rollout_index.push_back(static_cast<int64_t>(i));
    b.max_response = std::max<int64_t>(b.max_response, static_cast<int64_t>(b.samples[i].response.size()));
  }
  return b;
}

TEST(LoopAgentLoss, MultiTurnEpisodeMasksExactlyItsObservationsAndTrainsLikeOneHandBuiltSequence) {
  const std::vector<EpisodeScript> scripts = scripted_episodes();
  std::vector<RolloutSample> episodes, hand_built;
  for (const EpisodeScript& s : scripts) {
    episodes.push_back(sample_of_episode(s));
    hand_built.push_back(hand_built_sample(s));
  }
  // (a) The sample is the prompt, then every later id in order; the mask 1 exactly on the model's tokens.
  for (size_t i = 0; i < scripts.size(); ++i) {
    EXPECT_EQ(episodes[i].prompt, hand_built[i].prompt) << "episode " << i;
    EXPECT_EQ(episodes[i].response, hand_built[i].response) << "episode " << i;
    EXPECT_EQ(episodes[i].mask, hand_built[i].mask) << "episode " << i;
    EXPECT_EQ(episodes[i].rollout_logp, hand_built[i].rollout_logp) << "episode " << i;
  }

  // (b) Through GRPO's path, 3 micro-batches: the same loss and gradient as the hand-built sequences, bit for bit.
  const Trained a = train_step(batch_of(episodes, scripts), false);
  const Trained b = train_step(batch_of(hand_built, scripts), false);
  ASSERT_TRUE(std::isfinite(a.loss));
  ASSERT_GT(ops::l2_norm(host(), a.grads.flat()), 0.0);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_TRUE(same_bytes(a.grads.flat(), b.grads.flat())) << "the episode trains unlike its single sequence";

  // The episode's advantage reaches every assistant token of every turn: one non-zero value per episode, of the
  // sign of its reward against its group's mean.
  for (size_t i = 0; i < scripts.size(); ++i) {
    const RolloutSample& s = a.batch.samples[i];
    const size_t g = i / kGroupSize * kGroupSize;
    const double mean = (scripts[g].reward + scripts[g + 1].reward + scripts[g + 2].reward) / kGroupSize;
    size_t t = 0;
    for (const Piece& p : scripts[i].pieces)
      for (size_t k = 0; k < p.ids.size(); ++k, ++t) {
        if (p.source != TokenSource::kModel) continue;
        EXPECT_EQ(s.advantages[t], s.advantages[s.response.size() - 1]) << "episode " << i << " token " << t;
        EXPECT_EQ(s.advantages[t] > 0, scripts[i].reward > mean) << "episode " << i << " token " << t;
        EXPECT_NE(s.advantages[t], 0.0f) << "episode " << i << " token " << t;
      }
  }

  // (c) The update on the same inputs again gives the same gradient; with every observation token's old,
  // reference and engine log-probs and advantage changed, still the same; with one assistant token's changed (the
  // first turn's first token, the last turn's last), another.
  const Trained again = train_step(a.batch, true);
  ASSERT_TRUE(same_bytes(a.grads.flat(), again.grads.flat()));
  ScoredBatch observations_changed = a.batch;
  for (RolloutSample& s : observations_changed.samples)
    for (size_t t = 0; t < s.mask.size(); ++t)
      if (s.mask[t] == 0.0f) {
        s.old_logp[t] = -20.0f;
        s.ref_logp[t] = -0.01f;
        s.rollout_logp[t] = -9.0f;
        s.advantages[t] = 1e3f;
      }
  EXPECT_TRUE(same_bytes(a.grads.flat(), train_step(observations_changed, true).grads.flat()))
      << "an observation token's loss inputs reached the gradient";
  for (const bool last : {false, true}) {
    ScoredBatch assistant_changed = a.batch;
    RolloutSample& s = assistant_changed.samples[1];
    const size_t t = last ? s.response.size() - 1 : 0;
    ASSERT_EQ(s.mask[t], 1.0f);
    s.old_logp[t] -= 0.5f;
    s.advantages[t] += 1.0f;
    EXPECT_FALSE(same_bytes(a.grads.flat(), train_step(assistant_changed, true).grads.flat()))
        << (last ? "the last" : "the first") << " turn's assistant token did not reach the gradient";
  }
}

}  // namespace
}  // namespace rlcpp
