// rlcpp train (GRPO, colocated): a short seeded run on a small model raises the mean reward, times its
// phases so they add up to the step, logs mismatch metrics near 0 (same weights on both sides), and refuses
// samples of a policy version it did not expect.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "loop/consistency_probe.h"
#include "loop/controller.h"
#include "loop/mismatch.h"
#include "loop/rl_step.h"
#include "loop/rollout_samples.h"
#include "loop/step_draws.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "reward/task_registry.h"
#include "tests/error_test_support.h"
#include "tests/host_context.h"
#include "tests/train_test_support.h"

namespace rlcpp {
namespace {

using testing::host;

namespace fs = std::filesystem;

TrainConfig small_run(const fs::path& dir, const std::string& init) {
  TrainConfig c;
  c.run_dir = dir.string();
  c.init_checkpoint = init;
  c.rollout.placement = "colocated";  // split workers need the rlcpp binary: app_train_split_test
  c.rollout.prompts_per_step = 16;
  c.rollout.group_size = 8;
  c.ppo.mini_batch_size = 64;  // two mini-batches of 8 groups: the second is off-policy
  c.ppo.micro_batch_size = 64;
  c.optim.lr = 3e-3;
  c.steps = 12;
  c.eval_every = 0;
  c.eval_size = 20;
  return c;
}

TEST(LoopTrain, ShortGrpoRunRaisesMeanRewardAndTimesItsPhases) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_train_test";
  fs::remove_all(root);
  const TrainConfig cfg = small_run(root / "run", small_train_checkpoint(root / "init"));
  const TrainSummary s = run_train(cfg, config_to_json(cfg));
  ASSERT_EQ(s.mean_rewards.size(), 12u);
  const double first = (s.mean_rewards[0] + s.mean_rewards[1] + s.mean_rewards[2]) / 3;
  const double last = (s.mean_rewards[9] + s.mean_rewards[10] + s.mean_rewards[11]) / 3;
  // Measured at this seed: 0.003 over the first 3 steps, 0.067 over the last 3 (the format reward of 0.1 for a
  // well-formed number then EOS is learnt first); a broken advantage or update stays near 0.003.
  EXPECT_GT(last, first + 0.02) << "first 3 steps " << first << ", last 3 " << last;

  const std::vector<Json> metrics = read_jsonl(fs::path(s.run_dir) / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 12u);
  std::vector<double> other_shares;
  for (const Json& m : metrics) {
    const double step_s = m["timing_s/step"].get<double>();
    double sum = 0, shares = 0;
    for (const char* p : {"rollout", "reward", "old_logprob", "mismatch", "ref_logprob", "values", "advantage",
                          "update_actor", "update_critic", "weight_sync", "probe", "eval", "checkpoint", "other"}) {
      sum += m[std::string("timing_s/") + p].get<double>();
      shares += m[std::string("timing_share/") + p].get<double>();
    }
    EXPECT_NEAR(sum, step_s, 0.02 * step_s);
    EXPECT_NEAR(shares, 1.0, 0.02);
    EXPECT_GE(m["timing_s/other"].get<double>(), -1e-6);
    other_shares.push_back(m["timing_share/other"].get<double>());
    EXPECT_GT(m["timing_s/rollout"].get<double>(), 0);
    EXPECT_GT(m["timing_s/update_actor"].get<double>(), 0);
    // Engine and trainer score the same weights with the same kernels (packed matmul, per-query attention,
    // ops::row_logprob), each row whatever its batch: their log-probs agree bit for bit.
    EXPECT_EQ(m["mismatch/max_abs_dlogp"].get<double>(), 0.0);
    EXPECT_EQ(m["mismatch/k3"].get<double>(), 0.0);
    EXPECT_EQ(m["rollout_corr/kl"].get<double>(), 0.0);  // verl's figures of the same samples
    EXPECT_EQ(m["rollout_corr/chi2_token"].get<double>(), 0.0);
    EXPECT_EQ(m["rollout_corr/is_weight_max"].get<double>(), 1.0);
    EXPECT_GT(m["rollout_corr/tokens"].get<double>(), 0.0);
    EXPECT_FALSE(m.contains("probe_trainer/max_abs_dlogp"));  // one numerics: nothing else to compare
    EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0);  // after the sync, on the new weights
    EXPECT_GT(m["timing_s/probe"].get<double>(), 0);
    EXPECT_TRUE(m.contains("actor/pg_loss") && m.contains("actor/grad_norm") && m.contains("reward/mean"));
    EXPECT_EQ(m["policy_version"].get<int64_t>(), m["step"].get<int64_t>());
  }
  // The named phases cover the step: `other` is ~1 % of a 10 ms step here, but one step of a loaded machine can
  // lose a few ms to the scheduler anywhere, so the median is what is held to it.
  std::sort(other_shares.begin(), other_shares.end());
  EXPECT_LT(other_shares[other_shares.size() / 2], 0.2);
  EXPECT_TRUE(metrics.back().contains("eval/accuracy"));
  // The held-out accuracy by operand digit counts (the 3+3 class is most of add3's held-out set).
  EXPECT_TRUE(metrics.back().contains("eval/class/3+3")) << metrics.back().dump();
  EXPECT_TRUE(metrics.back().contains("eval/class/3+2"));
  const std::vector<Json> samples = read_jsonl(fs::path(s.run_dir) / "samples.jsonl");
  ASSERT_EQ(samples.size(), 12u * 4u);
  EXPECT_EQ(samples[4]["step"], 2);
  EXPECT_EQ(samples[4]["policy_version"], 1);  // step 2 samples with the weights of step 1's update
  EXPECT_TRUE(fs::exists(s.checkpoint + "/model.safetensors"));
}

TEST(LoopTrain, ProbeStopsTheRunWhenTheEngineMissedASync) {
  ModelConfig mc = model_preset("tiny");
  mc.num_hidden_layers = 1;
  ParameterStore trainer = init_random(mc, 8);
  const ParameterStore engine_copy = trainer.clone();
  Transformer model(mc);
  EngineConfig engine;
  engine.max_num_seqs = 16;
  std::unique_ptr<RolloutBackend> rollout = make_colocated_rollout(model, engine_copy, engine);
  TaskConfig tc;
  const std::unique_ptr<Task> task = make_task(tc);
  CharTokenizer tok;
  ProbeConfig probe;
  // Same weights: the same bits.
  EXPECT_EQ(run_consistency_probe(host(), *rollout, model, trainer, *task, tok, 6, probe, 0, nullptr, Device::kCPU)
                .engine.max_abs_dlogp,
            0.0);
  // The trainer moved on but the engine still holds the old weights: the probe must stop the run.
  for (int64_t i = 0; i < trainer.numel(); i += 7) trainer.flat().data<float>()[i] *= 1.05f;
  try {
    run_consistency_probe(host(), *rollout, model, trainer, *task, tok, 6, probe, 0, nullptr, Device::kCPU);
    FAIL() << "probe passed with stale engine weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("probe.max_abs_dlogp"), std::string::npos) << e.what();
  }
}

// A reward function that scores every response `value`: a broken scorer or reward server.
class ConstantReward : public RewardFunction {
 public:
  explicit ConstantReward(double value) : value_(value) {}
  std::vector<RewardResult> score(const std::vector<RewardQuery>& queries) override {
    std::vector<RewardResult> out(queries.size());
    for (RewardResult& r : out) r.total = value_;
    return out;
  }
  Json counters() const override { return Json::object(); }

 private:
  double value_;
};

// A one-layer tiny policy and its colocated engine, and a config of 2 prompts x 2 samples a step: what the tests
// of one step's draw and learning use.
struct TinyStep {
  ModelConfig mc = one_layer_tiny();
  ParameterStore params = init_random(mc, 8);
  Transformer model{mc};
  std::unique_ptr<RolloutBackend> rollout = make_colocated_rollout(model, params, small_engine());
  TrainConfig config = two_by_two();
  std::unique_ptr<Task> task = make_task(config.task);
  CharTokenizer tok;
  PhiloxStream data_rng{config.seed, 1};

  static ModelConfig one_layer_tiny() {
    ModelConfig mc = model_preset("tiny");
    mc.num_hidden_layers = 1;
    return mc;
  }
  static EngineConfig small_engine() {
    EngineConfig engine;
    engine.max_num_seqs = 16;
    return engine;
  }
  static TrainConfig two_by_two() {
    TrainConfig c;
    c.rollout.prompts_per_step = 2;
    c.rollout.group_size = 2;
    return c;
  }
};

// Rewards of +-1e308 made every step non-finite, and the run stopped advising a lower optim.lr: a reward that is
// not finite or past +-1e9 is named where it is drawn, with its step, sample, task, prompt and value.
TEST(LoopTrain, AbsurdRewardsAreNamedWithTheirSample) {
  TinyStep t;
  const auto draw_with = [&](double reward) {
    ConstantReward scorer(reward);
    return error_of([&] { draw_step({t.config, *t.task, scorer, t.tok, *t.rollout, t.data_rng}, 3, 0); });
  };
  for (const double absurd : {1e308, -1e308, 1e30, std::nan(""), -std::numeric_limits<double>::infinity()}) {
    const std::string e = draw_with(absurd);
    EXPECT_TRUE(e.find("step 3: the reward of sample 0 (task add3, prompt \"") != std::string::npos) << e;
    EXPECT_TRUE(e.find("reward.type \"local\") is ") != std::string::npos) << e;
    EXPECT_TRUE(e.find("within +-1e+09") != std::string::npos) << e;
  }
  EXPECT_TRUE(draw_with(1e308).find(") is 1e+308: a reward must be finite") != std::string::npos) << draw_with(1e308);
  EXPECT_EQ(draw_with(-1e9), "<no error>");
}

// The trainer scores a step's samples at the temperature and truncation the engine drew them with, which each
// sample carries, not at what the config says when the step learns (a resume under --allow-config-change with
// draws pending changes it in between): drawn at 0.7 with top_k 5 in logprob_space "sampled", the old log-probs
// equal the engine's bit for bit though the config now says temperature 1 and no top_k. Samples of two
// scorings in one batch are refused naming both.
TEST(LoopTrain, TheStepScoresSamplesAsTheyWereDrawnNotAsTheConfigSaysNow) {
  TinyStep t;
  TrainConfig& drawn_with = t.config;
  drawn_with.rollout.sampling.max_new_tokens = 6;
  drawn_with.rollout.sampling.temperature = 0.7f;
  drawn_with.rollout.sampling.top_k = 5;
  drawn_with.algorithm.logprob_space = "sampled";
  drawn_with.ppo.micro_batch_size = 2;  // two micro-batches of old log-probs
  ConstantReward scorer(1.0);
  PhiloxStream update_rng(drawn_with.seed, 2);
  const StepDraws drawn = draw_step({drawn_with, *t.task, scorer, t.tok, *t.rollout, t.data_rng}, 1, 0);
  for (const RolloutSample& s : drawn.drawn.samples)
    ASSERT_TRUE(s.scoring == (LogprobScoring{0.7f, Truncation{5, 1.0f}})) << s.scoring.describe();

  TrainConfig now = drawn_with;
  now.rollout.sampling.temperature = 1.0f;
  now.rollout.sampling.top_k = 0;
  const auto learn = [&](StepDraws d) {
    ParameterStore trained = t.params.clone();
    PolicyUpdater actor(t.model, trained, now.optim);
    RlContext ctx{now, *t.task, scorer, t.tok, t.model, trained, nullptr, actor, *t.rollout, t.data_rng, update_rng};
    PhaseTimer timer;
    return learn_step(ctx, std::move(d), timer);
  };
  const StepResult r = learn(drawn);
  ASSERT_TRUE(r.metrics.count("mismatch/max_abs_dlogp"));
  EXPECT_EQ(r.metrics.at("mismatch/max_abs_dlogp"), 0.0);

  StepDraws mixed = drawn;
  mixed.drawn.samples[3].scoring.temperature = 1.0f;
  const std::string e = error_of([&] { learn(mixed); });
  EXPECT_NE(e.find("sample 0 was drawn to be scored at temperature 0.7, top_k 5, top_p 1 but sample 3 at "
                   "temperature 1, top_k 5, top_p 1"),
            std::string::npos)
      << e;
}

// Each source of rollout/trainer mismatch switched on alone (mismatch lab): the step's own samples and the
// probe's trainer comparison show it, the probe's sync check (engine vs the trainer's weights in the engine's
// numerics) stays exactly 0 for a batch-invariant engine, and a rounded or quantised rollout reports its weight
// error at every sync.
TEST(LoopTrain, EachMismatchSourceAloneShowsInTheMetrics) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_train_mismatch_sources";
  fs::remove_all(root);
  const std::string init = small_train_checkpoint(root / "init");
  struct Source {
    std::string name;
    std::function<void(TrainConfig&)> set;
    bool invariant = true, rollout_rounded = true;
  };
  const std::vector<Source> sources = {
      {"rollout_bf16", [](TrainConfig& c) { c.rollout.dtype = "bf16"; }},
      {"rollout_fp16", [](TrainConfig& c) { c.rollout.dtype = "fp16"; }},
      {"rollout_int8", [](TrainConfig& c) { c.rollout.quantization = "int8"; }},
      {"rollout_fp8", [](TrainConfig& c) { c.rollout.quantization = "fp8_e4m3"; }},
      {"trainer_bf16", [](TrainConfig& c) { c.trainer.dtype = "bf16"; }, true, false},
      {"not_invariant", [](TrainConfig& c) { c.numerics.batch_invariant = false; }, false, false},
  };
  for (const Source& src : sources) {
    TrainConfig cfg = small_run(root / src.name, init);
    cfg.steps = 2;
    src.set(cfg);
    const TrainSummary s = run_train(cfg, config_to_json(cfg));
    const std::vector<Json> metrics = read_jsonl(fs::path(s.run_dir) / "metrics.jsonl");
    ASSERT_EQ(metrics.size(), 2u) << src.name;
    // The ledger's KV rule uses the rollout's element size, which the engine's own count matches.
    const Json ledger = load_json_file((fs::path(s.run_dir) / "ledger.json").string());
    const int64_t kv_bytes = cfg.rollout.dtype == "fp32" ? 4 : 2;
    EXPECT_EQ(ledger["rollout_bytes"]["kv_cache"].get<int64_t>(), kv_bytes) << src.name;
    EXPECT_EQ(metrics[0]["rollout/kv_bytes_per_token"].get<double>(),
              static_cast<double>(load_model_checkpoint(init).config().kv_bytes_per_token(kv_bytes)))
        << src.name;
    for (const Json& m : metrics) {
      EXPECT_GT(m["mismatch/max_abs_dlogp"].get<double>(), 0.0) << src.name;
      EXPECT_LT(m["mismatch/max_abs_dlogp"].get<double>(), 1.0) << src.name;
      EXPECT_GT(m["mismatch/k3"].get<double>(), 0.0) << src.name;
      EXPECT_GT(m["rollout_corr/k3_kl"].get<double>(), 0.0) << src.name;
      // E[rho^2] - 1 is >= 0 in expectation only: a batch's estimate may fall below.
      EXPECT_NE(m["rollout_corr/chi2_token"].get<double>(), 0.0) << src.name;
      EXPECT_LT(m["rollout_corr/is_ess"].get<double>(), 1.0) << src.name;
      if (src.invariant) {
        EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0) << src.name;
        EXPECT_GT(m["probe_trainer/max_abs_dlogp"].get<double>(), 0.0) << src.name;
      } else {
        EXPECT_GT(m["probe/max_abs_dlogp"].get<double>(), 0.0) << src.name;  // OpenBLAS vs the packed forward
        EXPECT_LT(m["probe/max_abs_dlogp"].get<double>(), cfg.probe.max_abs_dlogp_blas) << src.name;
      }
      if (src.invariant) {  // the whole distributions and the stage-by-stage view of the two numerics
        EXPECT_GT(m["probe_trainer/full_kl"].get<double>(), 0.0) << src.name;
        EXPECT_GT(m["rollout_corr/full_tv"].get<double>(), 0.0) << src.name;
        EXPECT_GE(m["probe_trainer/first_stage"].get<double>(), 0.0) << src.name;
        // The embedding is rounded to bf16/fp16 but never quantised: int8 and fp8 enter in the layers.
        const bool rounded_embedding = cfg.rollout.dtype != "fp32" || cfg.trainer.dtype != "fp32";
        EXPECT_EQ(m["probe_trainer/stage/embed/max_abs"].get<double>() > 0, rounded_embedding) << src.name;
      }
      EXPECT_EQ(m.contains("weight_sync/rel_rms_err"), src.rollout_rounded) << src.name;
      if (src.rollout_rounded) {
        EXPECT_GT(m["weight_sync/rel_rms_err"].get<double>(), 0.0) << src.name;
        EXPECT_LT(m["weight_sync/rel_rms_err"].get<double>(), 0.05) << src.name;
      }
    }
  }
}

// Bypass mode: the rollout's log-probs are the old ones, so there is no old_logprob phase and nothing to compare.
TEST(LoopTrain, BypassSkipsTheOldLogprobPhase) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_train_bypass";
  fs::remove_all(root);
  TrainConfig cfg = small_run(root / "run", small_train_checkpoint(root / "init"));
  cfg.steps = 2;
  cfg.rollout.dtype = "bf16";
  cfg.algorithm.policy_loss.rollout_correction.bypass = true;
  const TrainSummary s = run_train(cfg, config_to_json(cfg));
  for (const Json& m : read_jsonl(fs::path(s.run_dir) / "metrics.jsonl")) {
    EXPECT_EQ(m["timing_s/old_logprob"].get<double>(), 0.0);
    EXPECT_EQ(m["timing_share/old_logprob"].get<double>(), 0.0);
    EXPECT_FALSE(m.contains("mismatch/max_abs_dlogp"));
    EXPECT_GT(m["timing_s/update_actor"].get<double>(), 0.0);
    EXPECT_TRUE(m.contains("actor/pg_loss"));
  }
  cfg.algorithm.policy_loss.rollout_correction.is = "token";
  EXPECT_THROW(cfg.validate(), Error);  // a correction against old / rollout = 1 is refused
}

// tf32 (fp32 values, products on CUDA tensor cores with TF32 operands) is a compute dtype a config reaches for a
// role on a cuda device with numerics.batch_invariant false; on the CPU, or batch-invariant (the packed fma
// chain has no TF32 form), it is refused naming the key. (No GPU is needed: the device is only parsed.)
TEST(LoopTrain, Tf32IsAComputeDtypeOnlyForACudaRoleWithoutBatchInvariance) {
  TrainConfig c;
  c.device = "cuda";
  c.numerics.batch_invariant = false;
  c.trainer.dtype = "tf32";
  c.rollout.dtype = "tf32";
  EXPECT_EQ(c.trainer_numerics().compute, DType::kTF32);
  EXPECT_EQ(c.rollout_numerics().compute, DType::kTF32);
  EXPECT_EQ(c.rollout_numerics().compute_format(), DType::kF32);  // fp32 storage
  EXPECT_EQ(error_of([&] { c.check_numerics_devices(); }), "<no error>");
  TrainConfig remote = c;  // a remote worker checks its own --device
  remote.rollout.placement = "remote";
  remote.rollout.device = "cpu";
  EXPECT_EQ(error_of([&] { remote.check_numerics_devices(); }), "<no error>");

  TrainConfig invariant = c, cpu_rollout = c, cpu = c;
  invariant.numerics.batch_invariant = true;
  cpu_rollout.rollout.device = "cpu";
  cpu.device = "cpu";  // the CPU trainer is always batch-invariant: the device is named first
  for (const auto& [refused, needle] : std::vector<std::pair<TrainConfig, std::string>>{
           {invariant, "config key 'trainer.dtype': \"tf32\" has no batch-invariant form (the packed fma chain "
                       "multiplies fp32 operands), but numerics.batch_invariant is true"},
           {cpu_rollout, "config key 'rollout.dtype': \"tf32\" multiplies on CUDA tensor cores, but this role runs on "
                         "the CPU"},
           {cpu, "config key 'trainer.dtype': \"tf32\" multiplies on CUDA tensor cores, but this role runs on the "
                 "CPU"}}) {
    const TrainConfig& config = refused;  // a structured binding is not captured (clang 14, CI's ASan build)
    const std::string e = error_of([&] { config.check_numerics_devices(); });
    EXPECT_NE(e.find(needle), std::string::npos) << e;
  }
}

// rollout.weight_sync: a name it does not know, cuda-ipc for a placement it does not feed, cuda-ipc off a GPU and
// nccl workers on the trainer's GPU are each refused naming the key and what to set, before any work.
TEST(LoopTrain, WeightSyncSettingsAreCheckedByName) {
  TrainConfig cfg;
  cfg.rollout.weight_sync = "gloo";
  expect_error([&] { cfg.validate(); }, {"config key 'rollout.weight_sync': \"gloo\"", "\"cuda-ipc\" or \"nccl\""});
  cfg.rollout.weight_sync = "cuda-ipc";
  cfg.rollout.placement = "colocated";
  expect_error([&] { cfg.validate(); }, {"rollout.weight_sync", "rollout.placement is \"colocated\""});
  cfg.rollout.placement = "split";
  expect_error([&] { cfg.validate(); }, {"rollout.weight_sync", "the trainer runs on 'cpu'", "set device = cuda"});
  cfg.device = "cuda";
  cfg.rollout.device = "cpu";
  expect_error([&] { cfg.validate(); }, {"rollout.weight_sync", "the workers on 'cpu'"});
  cfg.rollout.weight_sync = "nccl";
  cfg.rollout.device = "";  // the trainer's cuda:0 for its workers too
  cfg.rollout.num_workers = 2;
  expect_error([&] { cfg.validate(); }, {"nccl puts worker w on cuda:(0 + w), cuda:0..cuda:1 for 2 workers",
                                        "the trainer's cuda:0", "set rollout.device = cuda:1"});
  cfg.rollout.weight_sync = "zmq";
  cfg.device = "cpu";
  cfg.validate();
}

// Bad reward.remote.* values are refused with the config, before the SFT warm start or any other work (they were
// found only when the reward client was made, after the warm start).
TEST(LoopTrain, RemoteRewardSettingsAreRefusedBeforeTheWarmStart) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_remote_reward_config_test";
  fs::remove_all(root);
  const std::vector<std::pair<std::function<void(RemoteRewardConfig&)>, std::string>> cases = {
      {[](RemoteRewardConfig& r) { r.timeout_ms = 0; }, "reward.remote.timeout_ms"},
      {[](RemoteRewardConfig& r) { r.retries = -1; }, "reward.remote.retries"},
      {[](RemoteRewardConfig& r) { r.batch_size = 0; }, "reward.remote.batch_size"},
      {[](RemoteRewardConfig& r) { r.on_failure = "retry"; }, "reward.remote.on_failure"},
      {[](RemoteRewardConfig& r) { r.endpoint = "foo"; }, "reward.remote.endpoint"},
      {[](RemoteRewardConfig& r) { r.endpoint = "tcp://127.0.0.1:70000"; }, "reward.remote.endpoint"}};
  for (const auto& [edit, key] : cases) {
    TrainConfig c;
    c.run_dir = (root / "run").string();
    c.rollout.placement = "colocated";
    c.warm_start.enabled = true;
    c.warm_start.sft.steps = 1;
    c.warm_start.sft.eval_size = 1;
    c.steps = 1;
    c.reward.type = "remote";
    edit(c.reward.remote);
    expect_error([&] { run_train(c, config_to_json(c)); }, {"config key '" + key + "'"});
    EXPECT_FALSE(fs::exists(root / "run")) << key << ": work started before the refusal";
    fs::remove_all(root);
  }
}

// logprob_space "sampled" with top-p sampling: the trainer replays the sampler's kept set, so rollout and
// trainer still agree exactly, and the ratio is taken in the distribution the tokens came from.
TEST(LoopTrain, SampledLogprobSpaceKeepsRolloutAndTrainerExact) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_train_sampled_space";
  fs::remove_all(root);
  TrainConfig cfg = small_run(root / "run", small_train_checkpoint(root / "init"));
  cfg.steps = 2;
  cfg.rollout.sampling.top_p = 0.9f;
  cfg.algorithm.logprob_space = "sampled";
  const TrainSummary s = run_train(cfg, config_to_json(cfg));
  for (const Json& m : read_jsonl(fs::path(s.run_dir) / "metrics.jsonl")) {
    EXPECT_EQ(m["mismatch/max_abs_dlogp"].get<double>(), 0.0);
    EXPECT_EQ(m["probe/max_abs_dlogp"].get<double>(), 0.0);
    EXPECT_TRUE(m.contains("actor/pg_loss"));
  }
  cfg.algorithm.policy_loss.entropy_coef = 0.01;
  EXPECT_THROW(cfg.validate(), Error);  // the truncated distribution's entropy is not computed
  cfg.algorithm.policy_loss.entropy_coef = 0;
  cfg.rollout.sampling.logprob_space = "sampled";  // the trainer's key is algorithm.logprob_space
  EXPECT_THROW(cfg.validate(), Error);
}

// optim.lr 1e308 (inf in fp32) with finite losses: the first update makes the weights non-finite. The run stops
// there with an error naming the step, before the colocated engine samples from them ("non-finite logits"
// thrown in its parallel region used to abort the process) and before a checkpoint saves them.
TEST(LoopTrain, AnLrThatOverflowsTheWeightsStopsTheRunWithAnError) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_train_overflow";
  fs::remove_all(root);
  TrainConfig cfg = small_run(root / "run", small_train_checkpoint(root / "init"));
  cfg.steps = 3;
  cfg.checkpoint_every = 1;
  cfg.optim.lr = 1e308;
  std::string error = "<no error>";
  try {
    run_train(cfg, config_to_json(cfg));
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("the weights became non-finite at optimizer step 1"), std::string::npos) << error;
  EXPECT_NE(error.find("tensor '"), std::string::npos) << error;
  EXPECT_TRUE(fs::is_empty(root / "run" / "checkpoints"));
  fs::remove_all(root);
}

TEST(LoopTrain, StaleVersionSamplesAreRefused) {
  std::vector<Sample> samples(3);
  for (Sample& s : samples) s.policy_version = s.last_policy_version = 4;
  EXPECT_NO_THROW(check_sample_versions(samples, 4));
  samples[2].last_policy_version = 5;  // a swap happened mid-sequence
  EXPECT_THROW(check_sample_versions(samples, 4), Error);
  samples[2].policy_version = samples[2].last_policy_version = 3;  // produced by an older policy
  try {
    check_sample_versions(samples, 4);
    FAIL() << "stale sample accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 3"), std::string::npos) << e.what();
  }
}

TEST(LoopTrain, MismatchMetricsMatchHandComputedValues) {
  const std::vector<std::vector<float>> rollout = {{std::log(0.5f), std::log(0.25f)}, {std::log(0.8f)}};
  const std::vector<std::vector<float>> trainer = {{std::log(0.4f), std::log(0.25f)}, {std::log(0.8f)}};
  const Mismatch m = logprob_mismatch(rollout, trainer);
  EXPECT_EQ(m.tokens, 3);
  EXPECT_NEAR(m.max_abs_dlogp, std::log(0.5 / 0.4), 1e-6);
  EXPECT_NEAR(m.mean_abs_dp, 0.1 / 3, 1e-6);
  const double r = std::log(0.4 / 0.5);
  EXPECT_NEAR(m.k1, -r / 3, 1e-6);
  EXPECT_NEAR(m.k3, (std::exp(r) - 1 - r) / 3, 1e-6);
  EXPECT_EQ(logprob_mismatch(rollout, rollout).max_abs_dlogp, 0.0);
  const std::vector<std::vector<float>> nan_trainer = {{NAN, 0.0f}, {0.0f}};
  EXPECT_TRUE(std::isnan(logprob_mismatch(rollout, nan_trainer).max_abs_dlogp));
  EXPECT_THROW(logprob_mismatch(rollout, {{0.0f}, {0.0f}}), Error);
}

}  // namespace
}  // namespace rlcpp
