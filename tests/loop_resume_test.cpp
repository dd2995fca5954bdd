// rlcpp train --resume: a run interrupted after a checkpoint and resumed writes the same metrics and samples
// as the uninterrupted run, bit for bit (weights, AdamW moments and step count, RNG positions restored), for
// GRPO, GRPO with a KL to the reference (saved once in checkpoints/reference), PPO (critic and its AdamW in
// each checkpoint) and online DPO.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "loop/controller.h"
#include "loop/run_dir.h"
#include "loop/train_checkpoint.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/safetensors.h"
#include "tests/error_test_support.h"
#include "tests/python_env.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

// Every figure but wall-clock ones and the process's memory.
// `harness`: an external harness's requests reach the engine in rounds its timing decides; which fresh sessions
// share a round, and so a group's prompt prefill, varies (rlcpp's engine counters of prefill work), the tokens not.
Json without_timing(Json j, bool harness = false) {
  const auto harness_timed = [](const std::string& key) {
    return key.rfind("rollout/prefill_tokens", 0) == 0 || key.rfind("rollout/prefix_cache", 0) == 0;
  };
  for (auto it = j.begin(); it != j.end();) {
    if (run_dependent_key(it.key()) || (harness && harness_timed(it.key())))
      it = j.erase(it);
    else
      ++it;
  }
  return j;
}

std::string read_file_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// 5 steps, checkpoints every 2, shuffled mini-batches (the update RNG must be restored too).
TrainConfig resumable_run(const fs::path& root) {
  TrainConfig c = small_grpo_run(small_train_checkpoint(root / "init"), 5);
  c.ppo.shuffle = true;
  c.checkpoint_every = 2;
  return c;
}

struct ResumedRuns {
  TrainSummary whole, cut, resumed;
};

// Runs `c` whole and again cut after step 3 (checkpoints 4 and 5 never happened, the metrics of steps 4-5 are
// lost; step 3's records, past the last checkpoint at step 2, are there and must be replaced), resumes the cut
// run and checks that both runs wrote the same files.
ResumedRuns expect_resume_matches_whole_run(const fs::path& root, const TrainConfig& c) {
  const bool harness = c.agent.harness_mode();
  ResumedRuns r;
  TrainConfig whole = c;
  whole.run_dir = (root / "whole").string();
  r.whole = run_train(whole, config_to_json(whole));

  TrainConfig cut = c;
  cut.run_dir = (root / "cut").string();
  r.cut = run_train(cut, config_to_json(cut));
  fs::remove_all(fs::path(r.cut.run_dir) / "checkpoints/step_4");
  fs::remove_all(fs::path(r.cut.run_dir) / "checkpoints/step_5");
  {
    std::vector<Json> m = read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl");
    std::ofstream out(fs::path(r.cut.run_dir) / "metrics.jsonl", std::ios::trunc);
    for (size_t i = 0; i < 3; ++i) out << m[i].dump() << "\n";
    out << m[3].dump().substr(0, 25);  // step 4's record, cut short by the kill (no newline): dropped at resume
  }
  r.resumed = resume_train(r.cut.run_dir);
  EXPECT_EQ(r.resumed.mean_rewards.size(), 3u);  // steps 3, 4, 5

  const std::vector<Json> ma = read_jsonl(fs::path(r.whole.run_dir) / "metrics.jsonl");
  const std::vector<Json> mb = read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl");
  EXPECT_EQ(ma.size(), 5u);
  EXPECT_EQ(mb.size(), 5u);
  for (size_t i = 0; i < std::min(ma.size(), mb.size()); ++i)
    EXPECT_EQ(without_timing(ma[i], harness), without_timing(mb[i], harness)) << "step " << i + 1;
  EXPECT_EQ(read_jsonl(fs::path(r.whole.run_dir) / "samples.jsonl"),
            read_jsonl(fs::path(r.cut.run_dir) / "samples.jsonl"));
  EXPECT_TRUE(same_weights(r.whole.checkpoint, r.resumed.checkpoint));
  EXPECT_TRUE(fs::exists(fs::path(r.resumed.checkpoint) / "state.json"));
  EXPECT_TRUE(fs::exists(fs::path(r.resumed.checkpoint) / "trainer_state.safetensors"));
  return r;
}

TEST(LoopResume, ResumedRunMatchesTheUninterruptedOneBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_test";
  fs::remove_all(root);
  expect_resume_matches_whole_run(root, resumable_run(root));
}

// A run stopped on request (TrainHooks::stop_requested, loop/run_driver.h) after step 3 ends with step 3's
// checkpoint (not due: checkpoints come every 2 steps) and records; resumed, it runs steps 4-5 and its files equal the
// uninterrupted run's.
TEST(LoopResume, RunStoppedOnRequestEndsWithItsStepsCheckpointAndResumesBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_stop_test";
  fs::remove_all(root);
  const TrainConfig c = resumable_run(root);
  TrainConfig whole = c;
  whole.run_dir = (root / "whole").string();
  const TrainSummary a = run_train(whole, config_to_json(whole));

  TrainConfig cut = c;
  cut.run_dir = (root / "stopped").string();
  int asked = 0;
  TrainHooks hooks;
  hooks.stop_requested = [&] { return ++asked == 3; };
  const TrainSummary stopped = run_train(cut, config_to_json(cut), nullptr, hooks);
  EXPECT_EQ(stopped.mean_rewards.size(), 3u);
  EXPECT_EQ(stopped.checkpoint, stopped.run_dir + "/checkpoints/step_3");
  EXPECT_FALSE(fs::exists(stopped.run_dir + "/checkpoints/step_3.partial"));
  EXPECT_EQ(read_jsonl(fs::path(stopped.run_dir) / "metrics.jsonl").size(), 3u);

  const TrainSummary resumed = resume_train(stopped.run_dir);
  EXPECT_EQ(resumed.mean_rewards.size(), 2u);  // steps 4 and 5
  const std::vector<Json> ma = read_jsonl(fs::path(a.run_dir) / "metrics.jsonl");
  const std::vector<Json> mb = read_jsonl(fs::path(stopped.run_dir) / "metrics.jsonl");
  ASSERT_EQ(mb.size(), 5u);
  for (size_t i = 0; i < ma.size(); ++i)
    EXPECT_EQ(without_timing(ma[i]), without_timing(mb[i])) << "step " << i + 1;
  EXPECT_EQ(read_jsonl(fs::path(a.run_dir) / "samples.jsonl"), read_jsonl(fs::path(stopped.run_dir) / "samples.jsonl"));
  EXPECT_TRUE(same_weights(a.checkpoint, resumed.checkpoint));
  fs::remove_all(root);
}

// Issue 34 item 6: an agent run whose episodes span steps (agent.turns_per_draw 2 of up to 5 guess turns) keeps
// the episodes in flight in its checkpoints and, resumed, replays them into their environments: the resumed run
// equals the uninterrupted one, metrics, samples and weights.
TEST(LoopResume, AgentRunWithEpisodesInFlightResumesBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_agent_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.task.name = "guess";
  c.agent.env = "guess";
  c.agent.max_turns = 5;
  c.agent.max_turn_tokens = 4;
  c.agent.turns_per_draw = 2;
  c.rollout.sampling.max_new_tokens = 4;
  expect_resume_matches_whole_run(root, c);
  const Json in_flight = load_json_file((root / "cut" / "checkpoints" / "step_2" / kEpisodesInFlightFile).string());
  EXPECT_TRUE(in_flight.is_array() && !in_flight.empty()) << "no episode was in flight at the checkpoint";
  // Step 1 ended no episode: it has no reward to report (not a NaN) and trains on nothing.
  const Json first = read_jsonl(root / "whole" / "metrics.jsonl").at(0);
  EXPECT_FALSE(first.contains("reward/mean")) << first.dump();
  EXPECT_EQ(first.at("agent/episodes").get<double>(), 0.0);
}

// Harness mode (agent.env "http", issue 35): the episodes an external harness played (scripts/agent_harness_example.py
// over the openai client, two turns each) are the sessions' records, sampled under their episodes' keys whatever
// the harness's concurrency: a resumed run replays the same draws and equals the uninterrupted one.
TEST(LoopResume, HarnessRunResumesBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_harness_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  use_example_harness(c, "--reward digits --attempts 2");
  expect_resume_matches_whole_run(root, c);
  const Json first = read_jsonl(root / "whole" / "metrics.jsonl").at(0);
  EXPECT_EQ(first.at("agent/turns_mean").get<double>(), 2.0);
}

// Harness episodes spanning weight syncs (agent.turns_per_draw 2, one harness for the run, three turns an
// episode): steps 1 and 3 leave every episode waiting on its third turn, which runs in the next draw under the
// new version; step 2's draw, whose step writes a checkpoint, lets them end, so the checkpoint holds none in
// flight and the resumed run (a new harness) equals the uninterrupted one.
TEST(LoopResume, HarnessRunWhoseEpisodesSpanSyncsResumesBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_harness_syncs_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  use_example_harness(c, "--reward digits --attempts 3");
  c.agent.turns_per_draw = 2;
  expect_resume_matches_whole_run(root, c);
  const std::vector<Json> m = read_jsonl(root / "whole" / "metrics.jsonl");
  ASSERT_EQ(m.size(), 5u);
  const int64_t episodes = c.rollout.prompts_per_step * c.rollout.group_size;
  EXPECT_EQ(m[0]["agent/in_flight"].get<double>(), episodes);  // all on their third turn
  EXPECT_EQ(m[0]["agent/harness_requests"].get<double>(), 2.0 * episodes);
  EXPECT_EQ(m[1]["agent/episodes"].get<double>(), 2.0 * episodes);  // step 1's, then step 2's, ended
  EXPECT_EQ(m[1]["agent/in_flight"].get<double>(), 0.0);
  EXPECT_EQ(m[1]["agent/turns_mean"].get<double>(), 3.0);
  EXPECT_EQ(m[1]["training/off_policy/token_staleness_max"].get<double>(), 1.0);  // step 1's first two turns
  // The trainer and the engine agree exactly on the tokens of the version the update starts from.
  EXPECT_EQ(m[1]["mismatch/current_version/max_abs_dlogp"].get<double>(), 0.0);
  EXPECT_EQ(m[3]["mismatch/current_version/max_abs_dlogp"].get<double>(), 0.0);
  EXPECT_EQ(m[2]["agent/in_flight"].get<double>(), episodes);
  const fs::path saved = root / "cut" / "checkpoints" / "step_2" / kEpisodesInFlightFile;
  if (fs::exists(saved)) {
    const Json in_flight = load_json_file(saved.string());
    EXPECT_TRUE(in_flight.is_null() || in_flight.empty()) << in_flight.dump().substr(0, 200);
  }
  fs::remove_all(root);
}

// Issue 34 item 6 under the async pipeline: configs/agent_calc.json cut to seconds (the small random model, no
// warm start, 4 task items x 4 episodes, 5 steps, 2 micro-batches) with async.max_staleness 1 and
// agent.turns_per_draw 1. Each step trains on episodes drawn one version back (its staleness recorded, and each
// token's); the checkpoint of step 2 holds step 3's episodes, drawn ahead, and the episodes still in flight after
// them; the resumed run equals the uninterrupted one, metrics, samples and weights.
TEST(LoopResume, AsyncAgentRunRecordsItsStalenessAndResumesWithPendingAndInFlightEpisodesBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_async_agent_test";
  fs::remove_all(root);
  TrainConfig c;
  config_from_json(load_json_file(std::string(RLCPP_SOURCE_DIR) + "/configs/agent_calc.json"), c);
  c.warm_start.enabled = false;
  c.init_checkpoint = small_train_checkpoint(root / "init");
  c.steps = 5;
  c.checkpoint_every = 2;
  c.eval_every = 0;
  c.eval_size = 10;
  c.rollout.prompts_per_step = 4;
  c.rollout.group_size = 4;
  c.ppo.mini_batch_size = 16;
  c.ppo.micro_batch_size = 8;
  c.agent.turns_per_draw = 1;
  c.async.max_staleness = 1;
  expect_resume_matches_whole_run(root, c);

  const fs::path checkpoint = root / "cut" / "checkpoints" / "step_2";
  const Json pending = load_json_file((checkpoint / kPendingRolloutsFile).string());
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0]["step"], 3);
  EXPECT_EQ(pending[0]["policy_version"], 1);
  EXPECT_TRUE(pending[0].contains("episodes")) << "step 3's draw was saved without its episodes";
  const Json in_flight = load_json_file((checkpoint / kEpisodesInFlightFile).string());
  EXPECT_TRUE(in_flight.is_array() && !in_flight.empty()) << "no episode was in flight at the checkpoint";
  const std::vector<Json> m = read_jsonl(root / "cut" / "metrics.jsonl");
  ASSERT_EQ(m.size(), 5u);
  double trained_episodes = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(m[i]["training/off_policy/staleness_max"].get<double>(), std::min<double>(1, i)) << "step " << i + 1;
    EXPECT_EQ(m[i]["training/off_policy/dropped_samples"].get<double>(), 0.0) << "step " << i + 1;
    trained_episodes += m[i]["agent/episodes"].get<double>();
    // An episode that ran over several draws holds tokens of older versions than its last turn's.
    if (m[i].contains("training/off_policy/token_staleness_max"))
      EXPECT_GE(m[i]["training/off_policy/token_staleness_max"].get<double>(),
                m[i]["training/off_policy/staleness_max"].get<double>())
          << "step " << i + 1;
  }
  EXPECT_GT(trained_episodes, 0.0);
  fs::remove_all(root);
}

TEST(LoopResume, KlRunResumesWithItsSavedReference) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_kl_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.algorithm.policy_loss.kl_coef = 0.1;  // large enough that a wrong reference changes the losses
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  const std::vector<Json> m = read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl");
  EXPECT_GT(m.back()["actor/kl_loss"].get<double>(), 0);  // the policy moved away from the reference
  // The reference is the initial policy, saved once.
  EXPECT_TRUE(same_weights(c.init_checkpoint, r.cut.run_dir + "/checkpoints/reference"));

  // Without it the run cannot resume, and says why.
  fs::remove_all(fs::path(r.cut.run_dir) / "checkpoints/reference");
  try {
    resume_train(r.cut.run_dir);
    FAIL() << "resumed a KL run without its reference";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoints/reference"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kl_coef"), std::string::npos) << e.what();
  }
}

// A LoRA run (trainer.lora) resumes bit for bit: each checkpoint holds its adapters (adapter/, PEFT's files) and
// their AdamW moments, the frozen base is checkpoints/reference (the KL's reference too), and the checkpoint's
// model is the base with the adapters merged, bit for bit.
TEST(LoopResume, LoraRunResumesFromItsAdaptersBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_lora_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.trainer.lora.rank = 4;
  c.trainer.lora.alpha = 8;
  c.trainer.lora.targets = {"q_proj", "v_proj", "gate_proj"};
  c.optim.lr = 1e-2;
  c.algorithm.policy_loss.kl_coef = 0.1;
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  const std::string ckpt = r.whole.checkpoint;
  ASSERT_TRUE(is_peft_adapter_dir(ckpt + "/adapter"));
  EXPECT_TRUE(same_weights(c.init_checkpoint, r.whole.run_dir + "/checkpoints/reference"));
  const ParameterStore base = load_model_checkpoint(c.init_checkpoint);
  const ParameterStore saved = load_model_checkpoint(ckpt);
  const LoraAdapters adapters = LoraAdapters::load_peft(ckpt + "/adapter", base.config());
  EXPECT_EQ(adapters.config().resolved_targets(), c.trainer.lora.targets);
  ParameterStore merged = base.clone();
  adapters.merge(ExecContext::cpu(), base, merged);
  EXPECT_EQ(0, std::memcmp(merged.flat().data<float>(), saved.flat().data<float>(),
                           static_cast<size_t>(saved.numel()) * sizeof(float)));
  EXPECT_FALSE(same_weights(c.init_checkpoint, ckpt));  // the adapters trained
  const SafetensorsFile moments = read_safetensors(ckpt + "/trainer_state.safetensors");
  EXPECT_EQ(moments.tensors.at("exp_avg").numel(), adapters.weights().numel());
  const std::vector<Json> m = read_jsonl(fs::path(r.whole.run_dir) / "metrics.jsonl");
  EXPECT_GT(m.back()["actor/kl_loss"].get<double>(), 0);  // the merged policy moved away from its base
}

// A base held in bf16 (trainer.lora.base_dtype): the run starts from its initial policy rounded to bf16, saved as
// checkpoints/reference, and the checkpoint's merged weights are that base plus the adapters, bit for bit, after a
// resume as in one run. Its KL term's reference is the bf16 base's forward: at the first step (B = 0) the policy
// is the base and the KL exactly 0 — the bf16-held weights compute what the merged fp32 ones of their values do.
TEST(LoopResume, LoraRunWithABf16BaseAndAKlTermResumesBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_lora_bf16_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.trainer.lora.rank = 4;
  c.trainer.lora.alpha = 8;
  c.trainer.lora.base_dtype = "bf16";
  c.algorithm.policy_loss.kl_coef = 0.1;
  c.ppo.mini_batch_size = 64;  // one optimizer step a step (of two micro-batches): step 1's KL is all at B = 0
  c.ppo.micro_batch_size = 32;
  c.optim.lr = 1e-2;
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  const std::vector<Json> m = read_jsonl(fs::path(r.whole.run_dir) / "metrics.jsonl");
  EXPECT_EQ(m.front()["actor/kl_loss"].get<double>(), 0.0);
  EXPECT_GT(m.back()["actor/kl_loss"].get<double>(), 0.0);  // the merged policy moved away from its base
  const ParameterStore init = load_model_checkpoint(c.init_checkpoint);
  const ParameterStore base = load_model_checkpoint(r.whole.run_dir + "/checkpoints/reference");
  int64_t rounded = 0;
  for (int64_t i = 0; i < base.numel(); ++i) {
    const float b = base.flat().data<float>()[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(b) & 0xFFFFu, 0u) << "reference value " << i << " is not a bf16";
    ASSERT_LE(std::fabs(b - init.flat().data<float>()[i]), std::fabs(init.flat().data<float>()[i]) / 256) << i;
    rounded += b != init.flat().data<float>()[i];
  }
  EXPECT_GT(rounded, base.numel() / 2);
  const ParameterStore saved = load_model_checkpoint(r.whole.checkpoint);
  const LoraAdapters adapters = LoraAdapters::load_peft(r.whole.checkpoint + "/adapter", base.config());
  ParameterStore merged = base.clone();
  adapters.merge(ExecContext::cpu(), base, merged);
  EXPECT_EQ(0, std::memcmp(merged.flat().data<float>(), saved.flat().data<float>(),
                           static_cast<size_t>(saved.numel()) * sizeof(float)));
  EXPECT_FALSE(same_weights(r.whole.run_dir + "/checkpoints/reference", r.whole.checkpoint));  // it trained

  c.trainer.lora.base_dtype = "fp16";
  expect_error([&] { c.validate(); }, {"'trainer.lora.base_dtype': \"fp32\" or \"bf16\", got \"fp16\""});
}

// rollout.lora_merge false: the engine applies the adapters unmerged beside the base, taking the checkpoint's
// adapters on resume; with LoRA dropout in the trainer, whose masks are keyed by the optimizer step: the resumed run
// equals the whole one, and the probe (the engine against the trainer's unmerged forward) is exactly 0. With the
// base held in fp32 and in bf16 (the engine, the dropout forward and the KL reference all read the bf16 base). The
// key is refused where it has no meaning.
TEST(LoopResume, AnUnmergedLoraRunWithDropoutResumesBitForBit) {
  for (const char* base_dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(base_dtype);
    const fs::path root = fs::temp_directory_path() / (std::string("rlcpp_resume_lora_unmerged_test_") + base_dtype);
    fs::remove_all(root);
    TrainConfig c = resumable_run(root);
    c.trainer.lora.rank = 4;
    c.trainer.lora.alpha = 8;
    c.trainer.lora.dropout = 0.1;
    c.trainer.lora.base_dtype = base_dtype;
    if (std::string(base_dtype) == "bf16") c.algorithm.policy_loss.kl_coef = 0.1;
    c.optim.lr = 1e-2;
    c.rollout.lora_merge = false;
    const ResumedRuns r = expect_resume_matches_whole_run(root, c);
    const std::vector<Json> metrics = read_jsonl(fs::path(r.whole.run_dir) / "metrics.jsonl");
    for (const Json& m : metrics) EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0);
    if (c.algorithm.policy_loss.kl_coef > 0) EXPECT_GT(metrics.back()["actor/kl_loss"].get<double>(), 0.0);
    fs::remove_all(root);
  }

  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_lora_unmerged_test_keys";
  TrainConfig c = resumable_run(root);
  c.rollout.lora_merge = false;
  expect_error([&] { c.validate(); }, {"'rollout.lora_merge'", "trains no adapters"});
  fs::remove_all(root);
}

// Refilled dynamic sampling draws more prompts from the data stream and more seeds: a resumed run draws the
// same ones. (The random policy rarely has a spread, so most steps use all three draws.)
TEST(LoopResume, RefilledDynamicSamplingResumesBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_refill_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.filter_groups.enabled = true;
  c.filter_groups.max_groups = 2;
  c.filter_groups.max_draws = 3;
  c.ppo.mini_batch_size = 16;
  c.ppo.micro_batch_size = 8;
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  double draws = 0;
  for (const Json& j : read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl")) draws += j["filter/draws"].get<double>();
  EXPECT_GT(draws, 5.0) << "some step must have refilled";
}

// An async run's checkpoint keeps the draws made ahead of it (steps 3 and 4 at step 2, staleness 2): the resumed
// run trains on them, not on fresh ones, and so equals the uninterrupted run.
TEST(LoopResume, AsyncRunResumesWithItsPendingRollouts) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_async_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.async.max_staleness = 2;
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  const Json pending = load_json_file(r.cut.run_dir + "/checkpoints/step_2/pending_rollouts.json");
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0]["step"], 3);
  EXPECT_EQ(pending[0]["policy_version"], 0);
  EXPECT_EQ(pending[1]["step"], 4);
  EXPECT_EQ(pending[1]["policy_version"], 1);
  const std::vector<Json> m = read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl");
  for (size_t i = 0; i < m.size(); ++i)
    EXPECT_EQ(m[i]["training/off_policy/staleness_max"].get<double>(), std::min<double>(2, i)) << "step " << i + 1;
}

// Resumed under a lower bound (staleness 1), the pending draws of steps 3 and 4 (versions 0 and 1, trained on at
// versions 2 and 3) are too old: they are dropped and counted, the policy stays, and step 5 trains on draws one
// version old again.
TEST(LoopResume, PendingRolloutsOlderThanALoweredBoundAreDropped) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_async_drop_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.async.max_staleness = 2;
  c.run_dir = (root / "run").string();
  const TrainSummary first = run_train(c, config_to_json(c));
  fs::remove_all(fs::path(first.run_dir) / "checkpoints/step_4");  // back to step 2, with steps 3 and 4 drawn
  fs::remove_all(fs::path(first.run_dir) / "checkpoints/step_5");
  Json edited = load_json_file(first.run_dir + "/config.json");
  edited["async"]["max_staleness"] = 1;
  write_json_file_atomic(first.run_dir + "/config.json", edited);
  const TrainSummary resumed = resume_train(first.run_dir, /*allow_config_change=*/true);
  ASSERT_EQ(resumed.mean_rewards.size(), 3u);
  const std::vector<Json> m = read_jsonl(fs::path(first.run_dir) / "metrics.jsonl");
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[2]["training/off_policy/dropped_samples"], 64.0);
  EXPECT_EQ(m[2]["training/off_policy/staleness_max"], 2.0);
  EXPECT_EQ(m[3]["training/off_policy/dropped_samples"], 64.0);
  EXPECT_FALSE(m[2].contains("actor/pg_loss"));  // nothing learned from them
  EXPECT_EQ(m[4]["training/off_policy/dropped_samples"], 0.0);
  EXPECT_EQ(m[4]["training/off_policy/staleness_max"], 1.0);  // drawn in step 4's background, with version 3
  EXPECT_TRUE(m[4].contains("actor/pg_loss"));
}

// Draws made ahead under one group size cannot be trained on under another (they failed deep in the step, "sample 4
// belongs to group 1"): a resume with an edited rollout.group_size or prompts_per_step while they are pending is
// refused naming the keys and the file.
TEST(LoopResume, PendingRolloutsOfAnotherGroupSizeAreRefusedByName) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_async_group_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.steps = 3;
  c.async.max_staleness = 1;
  c.run_dir = (root / "run").string();
  const TrainSummary first = run_train(c, config_to_json(c));
  fs::remove_all(fs::path(first.run_dir) / "checkpoints/step_3");  // back to step 2, with step 3 drawn
  for (const auto& [key, value] : {std::pair{"group_size", 4}, {"prompts_per_step", 4}}) {
    Json edited = load_json_file(first.run_dir + "/config.json");
    edited["rollout"][key] = value;
    write_json_file_atomic(first.run_dir + "/config.json", edited);
    expect_error([&] { resume_train(first.run_dir, /*allow_config_change=*/true); },
                 {"checkpoints/step_2/pending_rollouts.json", "step 3 was drawn ahead", "8 prompts x 8 samples",
                  "rollout.prompts_per_step", "rollout.group_size", "cannot change while draws"});
    write_json_file_atomic(first.run_dir + "/config.json", config_to_json(c));
  }
  EXPECT_FALSE(fs::exists(fs::path(first.run_dir) / "checkpoints/step_3"));
  EXPECT_EQ(resume_train(first.run_dir).mean_rewards.size(), 1u);  // the config restored, it resumes
}

// Distillation resumes against its teacher (read again from algorithm.distill.teacher).
TEST(LoopResume, DistillationRunResumes) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_distill_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.algorithm = algorithm_defaults("distill");
  ModelConfig mc = load_model_checkpoint(c.init_checkpoint).config();
  c.algorithm.distill.teacher = (root / "teacher").string();
  save_model_checkpoint(c.algorithm.distill.teacher, init_random(mc, 77));
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  EXPECT_GT(read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl").back()["distill/reverse_kl"].get<double>(), 0);
}

TEST(LoopResume, PpoRunResumesItsCritic) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_ppo_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.algorithm = algorithm_defaults("ppo");  // a k1 KL in the reward: the reference is needed too
  c.critic.optim.lr = 3e-3;
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  EXPECT_TRUE(same_weights(r.whole.checkpoint + "/critic", r.resumed.checkpoint + "/critic"));
  const std::vector<Json> m = read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl");
  EXPECT_TRUE(m.back().contains("critic/vf_loss"));
}

TEST(LoopResume, OnlineDpoRunResumes) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_dpo_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.algorithm = algorithm_defaults("dpo");
  const ResumedRuns r = expect_resume_matches_whole_run(root, c);
  // Pairs were found, so the updates (and the saved reference) mattered.
  double pairs = 0;
  for (const Json& j : read_jsonl(fs::path(r.cut.run_dir) / "metrics.jsonl")) pairs += j["dpo/pairs"].get<double>();
  EXPECT_GT(pairs, 0);
}


// A run directory belongs to one process: a second resume is refused while the first holds it, naming it.
TEST(LoopResume, SecondProcessOnTheSameRunIsRefused) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_lock_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.steps = 2;
  c.run_dir = (root / "run").string();
  const TrainSummary first = run_train(c, config_to_json(c));
  {
    const RunDir held = RunDir::open_to_resume(first.run_dir);  // as another process would hold it
    try {
      resume_train(first.run_dir);
      FAIL() << "resumed a run another holder had";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is in use"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(::getpid())), std::string::npos) << e.what();
    }
    // A fresh run asked for the same directory goes next to it instead.
    const RunDir fresh = RunDir::create_fresh(first.run_dir);
    EXPECT_NE(fresh.path(), first.run_dir);
  }
  // Released: it resumes (nothing left to do past step 2, so it only finishes), naming its last checkpoint.
  const TrainSummary again = resume_train(first.run_dir);
  EXPECT_EQ(again.checkpoint, first.checkpoint);
}

TEST(LoopResume, EditedConfigIsRefusedNamingTheChangedKeys) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_edit_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.steps = 2;
  c.checkpoint_every = 1;
  c.run_dir = (root / "run").string();
  const TrainSummary first = run_train(c, config_to_json(c));
  fs::remove_all(fs::path(first.run_dir) / "checkpoints/step_2");
  Json edited = load_json_file(first.run_dir + "/config.json");
  edited["optim"]["lr"] = 0.01;
  edited["rollout"]["group_size"] = 4;
  write_json_file_atomic(first.run_dir + "/config.json", edited);
  try {
    resume_train(first.run_dir);
    FAIL() << "resumed under an edited config without a word";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("optim.lr: 0.003"), std::string::npos) << what;
    EXPECT_NE(what.find("rollout.group_size: 8 -> 4"), std::string::npos) << what;
    EXPECT_NE(what.find("--allow-config-change"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(fs::path(first.run_dir) / "checkpoints/step_2"));  // nothing ran
  const TrainSummary resumed = resume_train(first.run_dir, /*allow_config_change=*/true);
  EXPECT_EQ(resumed.mean_rewards.size(), 1u);  // step 2, under the edited config
  EXPECT_EQ(checkpoint_run_config(resumed.checkpoint)["optim"]["lr"], 0.01);
}

TEST(LoopResume, KeepLastDeletesOlderCheckpointsAndStartCleansUnfinishedWrites) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_keep_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.steps = 4;
  c.checkpoint_every = 1;
  c.checkpoint_keep_last = 2;
  c.run_dir = (root / "run").string();
  const TrainSummary first = run_train(c, config_to_json(c));
  const fs::path ckpts = fs::path(first.run_dir) / "checkpoints";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ckpts)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step_3", "step_4"}));

  // What a killed or disk-full write leaves behind is removed when the run is next started.
  fs::create_directories(ckpts / "step_5.partial");
  fs::create_directories(ckpts / "step_5.partial.tmp-AbC123");
  std::ofstream(ckpts / "step_5.partial" / "model.safetensors") << "half";
  resume_train(first.run_dir);
  EXPECT_FALSE(fs::exists(ckpts / "step_5.partial"));
  EXPECT_FALSE(fs::exists(ckpts / "step_5.partial.tmp-AbC123"));
  EXPECT_TRUE(fs::exists(ckpts / "step_4"));
}

TEST(LoopResume, ConfigThatAWorkerWouldRejectFailsBeforeAnyWork) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_validate_test";
  fs::remove_all(root);
  const auto error_of = [&](const std::function<void(TrainConfig&)>& edit) {
    TrainConfig c = resumable_run(root);
    c.run_dir = (root / "run").string();
    edit(c);
    try {
      run_train(c, config_to_json(c));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of([](TrainConfig& c) { c.rollout.prompts_per_step = 100000000; }).find("rollout.prompts_per_step"),
            std::string::npos);
  EXPECT_NE(error_of([](TrainConfig& c) { c.rollout.engine.block_size = 0; }).find("rollout.engine"),
            std::string::npos);
  EXPECT_NE(error_of([](TrainConfig& c) { c.rollout.sampling.stop_tokens = {99999}; }).find("outside the vocabulary"),
            std::string::npos);
  // A subnormal temperature passes "> 0" but makes every log-prob NaN.
  const std::string cold = error_of([](TrainConfig& c) { c.rollout.sampling.temperature = 1e-45f; });
  EXPECT_NE(cold.find("config key 'rollout.sampling': temperature 1.4013e-45 is not 0 (greedy) or a finite number "
                      ">= 0.001"),
            std::string::npos)
      << cold;
  EXPECT_FALSE(fs::exists(root / "run"));  // no run directory was made
  // Keys that would run wrong rather than fail: a negative learning rate from the cosine floor, weight decay
  // that grows the weights, a timeout that overflows into "expired", a sampling seed the run would ignore.
  EXPECT_NE(error_of([](TrainConfig& c) { c.optim.min_lr_ratio = -1; }).find("optim.min_lr_ratio"), std::string::npos);
  EXPECT_NE(error_of([](TrainConfig& c) { c.optim.weight_decay = -1; }).find("optim.weight_decay"), std::string::npos);
  EXPECT_NE(error_of([](TrainConfig& c) { c.rollout.worker_timeout_s = 1e16; }).find("rollout.worker_timeout_s"),
            std::string::npos);
  EXPECT_NE(error_of([](TrainConfig& c) { c.rollout.sampling.seed = 5; }).find("rollout.sampling.seed"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(root / "run"));
}

// A state.json whose step is not its folder's would replay (or skip) steps over the checkpoints and metrics
// already saved: refused, naming the file, and nothing of the run is touched.
TEST(LoopResume, StateWhoseStepIsNotItsFoldersIsRefusedAndNothingIsOverwritten) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_resume_state_step_test";
  fs::remove_all(root);
  TrainConfig c = resumable_run(root);
  c.run_dir = (root / "run").string();
  const TrainSummary s = run_train(c, config_to_json(c));
  const fs::path state = fs::path(s.checkpoint) / "state.json";
  const std::string metrics_before = read_file_text(fs::path(s.run_dir) / "metrics.jsonl");
  const auto checkpoints_before = std::distance(fs::directory_iterator(fs::path(s.run_dir) / "checkpoints"),
                                                fs::directory_iterator{});
  const Json original = load_json_file(state.string());
  for (int64_t step : {int64_t{-5}, int64_t{1}, int64_t{100}}) {
    Json edited = original;
    edited["step"] = step;
    std::ofstream(state) << edited.dump();
    expect_error([&] { resume_train(s.run_dir); },
                 {state.string(), "step " + std::to_string(step) + " does not match its checkpoint folder step_5"});
    EXPECT_EQ(read_file_text(fs::path(s.run_dir) / "metrics.jsonl"), metrics_before) << "step " << step;
    EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(s.run_dir) / "checkpoints"), fs::directory_iterator{}),
              checkpoints_before);
  }
  Json negative = original;
  negative["policy_version"] = -2;
  std::ofstream(state) << negative.dump();
  expect_error([&] { resume_train(s.run_dir); }, {state.string(), "policy_version -2"});
  Json far = original;
  far["data_rng"]["index"] = uint64_t{1} << 62;
  std::ofstream(state) << far.dump();
  expect_error([&] { resume_train(s.run_dir); }, {state.string() + " data_rng: index 4611686018427387904 is past 2^48"});
  std::ofstream(state) << original.dump();

  // A negative AdamW second moment (sqrt of it: NaN at the first update) is refused at load, naming the element.
  const std::string moments = (fs::path(s.checkpoint) / "trainer_state.safetensors").string();
  SafetensorsFile f = read_safetensors(moments);
  f.tensors.at("exp_avg_sq").data<float>()[7] = -1.0f;
  write_safetensors(moments, {{"exp_avg", f.tensors.at("exp_avg")}, {"exp_avg_sq", f.tensors.at("exp_avg_sq")}});
  expect_error([&] { resume_train(s.run_dir); }, {moments + " exp_avg_sq: holds -1 at element 7", "never negative"});
  EXPECT_EQ(read_file_text(fs::path(s.run_dir) / "metrics.jsonl"), metrics_before);
}

}  // namespace
}  // namespace rlcpp
