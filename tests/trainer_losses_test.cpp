// Every loss, its gradients and its metrics against PyTorch autograd (tests/golden/losses_golden.py).
//
// The golden JSON is committed, so this test runs where torch is absent (CI, CUDA builders) and always checks
// the same numbers. Where /usr/bin/python3 can import torch, FreshGoldenFileMatches also reruns the script into
// a temporary file and checks the C++ against that: a script edited without regenerating the committed file,
// or a committed file that no longer matches its script, fails there instead of passing silently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <unistd.h>

#include "core/config.h"
#include "trainer/advantages.h"
#include "trainer/algorithm_config.h"
#include "trainer/data_metrics.h"
#include "trainer/dpo_loss.h"
#include "trainer/kl.h"
#include "trainer/loss_normalizer.h"
#include "trainer/policy_loss.h"
#include "trainer/sft_loss.h"
#include "trainer/value_loss.h"

namespace rlcpp {
namespace {

// fp32 inputs, double arithmetic on both sides: agreement is far tighter than this; 1e-5 is the bound.
constexpr double kRelTol = 1e-5;
constexpr double kAbsTol = 1e-6;

std::vector<float> floats(const Json& j) {
  std::vector<float> out;
  for (const auto& x : j) out.push_back(x.get<float>());
  return out;
}

std::vector<int64_t> ints(const Json& j) {
  std::vector<int64_t> out;
  for (const auto& x : j) out.push_back(x.get<int64_t>());
  return out;
}

std::optional<std::vector<float>> optional_floats(const Json& inputs, const char* key) {
  if (!inputs.contains(key)) return std::nullopt;
  return floats(inputs[key]);
}

std::optional<std::span<const float>> view(const std::optional<std::vector<float>>& x) {
  if (!x) return std::nullopt;
  return std::span<const float>(*x);
}

void expect_close(double actual, double expected, const std::string& what) {
  EXPECT_TRUE(std::isfinite(actual)) << what << " is " << actual;
  EXPECT_LE(std::abs(actual - expected), kAbsTol + kRelTol * std::abs(expected))
      << what << ": got " << actual << ", torch " << expected;
}

void expect_close(std::span<const float> actual, const Json& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    expect_close(actual[i], expected[i].get<double>(), what + "[" + std::to_string(i) + "]");
}

// The C++ reports exactly the metrics torch computed, with the same values.
void expect_metrics(const LossMetrics& m, const Json& expected) {
  std::set<std::string> got, want;
  for (const auto& [name, e] : m.entries()) got.insert(name);
  for (auto it = expected.begin(); it != expected.end(); ++it) want.insert(it.key());
  EXPECT_EQ(got, want);
  for (auto it = expected.begin(); it != expected.end(); ++it)
    if (m.has(it.key())) expect_close(m.value(it.key()), it.value().get<double>(), "metric " + it.key());
}

template <class C> C config_of(const Json& j) {
  C c;
  config_from_json(j, c);
  return c;
}

// The policy loss of a golden case's inputs under `cfg` (the case's own config, or a variation of it).
LossOutput run_policy(const Json& c, const PolicyLossConfig& cfg) {
  const Json& in = c["inputs"];
  auto cu = ints(in["cu"]);
  auto logp = floats(in["logp"]), old = floats(in["old_logp"]), adv = floats(in["advantages"]),
       mask = floats(in["mask"]);
  auto ref = optional_floats(in, "ref_logp"), entropy = optional_floats(in, "entropy"),
       rollout = optional_floats(in, "rollout_logp");
  auto norm = LossNormalizer::over_batch(parse_loss_agg(cfg.agg, "agg"), cu, mask, cfg.token_sum_norm);
  return policy_loss({cu, logp, old, adv, mask, view(ref), view(entropy), view(rollout)}, cfg, norm);
}

void check_policy(const Json& c) {
  const auto cfg = config_of<PolicyLossConfig>(c["config"]);
  cfg.validate("case");
  const LossOutput out = run_policy(c, cfg);
  const Json& e = c["expected"];
  expect_close(out.loss, e["loss"].get<double>(), "loss");
  expect_close(out.dlogp, e["dlogp"], "dlogp");
  if (e.contains("dentropy")) expect_close(out.dentropy, e["dentropy"], "dentropy");
  else EXPECT_TRUE(out.dentropy.empty());
  EXPECT_TRUE(out.dvalue.empty());
  expect_metrics(out.metrics, e["metrics"]);
}

void check_value(const Json& c) {
  const Json& in = c["inputs"];
  const auto cfg = config_of<PpoConfig>(c["config"]);
  auto cu = ints(in["cu"]);
  auto values = floats(in["values"]), old = floats(in["old_values"]), ret = floats(in["returns"]),
       mask = floats(in["mask"]);
  auto norm = LossNormalizer::over_batch(parse_loss_agg(cfg.value_agg, "value_agg"), cu, mask, 16.0);
  LossOutput out = value_loss({cu, values, old, ret, mask}, cfg.value_clip, norm);
  expect_close(out.loss, c["expected"]["loss"].get<double>(), "loss");
  expect_close(out.dvalue, c["expected"]["dvalue"], "dvalue");
  EXPECT_TRUE(out.dlogp.empty());
  expect_metrics(out.metrics, c["expected"]["metrics"]);
}

void check_sft(const Json& c) {
  const Json& in = c["inputs"];
  auto cu = ints(in["cu"]);
  auto logp = floats(in["logp"]), mask = floats(in["mask"]);
  auto norm = LossNormalizer::over_batch(parse_loss_agg(c["config"]["agg"].get<std::string>(), "agg"), cu, mask,
                                         c["config"]["token_sum_norm"].get<double>());
  LossOutput out = sft_loss(cu, logp, mask, norm);
  expect_close(out.loss, c["expected"]["loss"].get<double>(), "loss");
  expect_close(out.dlogp, c["expected"]["dlogp"], "dlogp");
  expect_metrics(out.metrics, c["expected"]["metrics"]);
}

void check_dpo(const Json& c) {
  const Json& in = c["inputs"];
  auto cu = ints(in["cu"]);
  auto logp = floats(in["logp"]), ref = floats(in["ref_logp"]), mask = floats(in["mask"]);
  std::vector<DpoPair> pairs;
  for (const auto& p : in["pairs"]) pairs.push_back({p[0].get<int64_t>(), p[1].get<int64_t>()});
  LossOutput out = dpo_loss({cu, logp, ref, mask, pairs}, config_of<DpoConfig>(c["config"]),
                            c["global_num_pairs"].get<double>());
  expect_close(out.loss, c["expected"]["loss"].get<double>(), "loss");
  expect_close(out.dlogp, c["expected"]["dlogp"], "dlogp");
  expect_metrics(out.metrics, c["expected"]["metrics"]);
}

void check_kl(const Json& c) {
  auto logp = floats(c["inputs"]["logp"]), ref = floats(c["inputs"]["ref_logp"]);
  const KlEstimator est = parse_kl_estimator(c["config"]["kl_estimator"].get<std::string>(), "kl_estimator");
  for (size_t i = 0; i < logp.size(); ++i) {
    const KlTerm k = kl_estimate(logp[i], ref[i], est);
    expect_close(k.value, c["expected"]["value"][i].get<double>(), "value[" + std::to_string(i) + "]");
    expect_close(k.dlogp, c["expected"]["dlogp"][i].get<double>(), "dlogp[" + std::to_string(i) + "]");
  }
}

void check_group_adv(const Json& c) {
  auto scores = floats(c["inputs"]["scores"]);
  auto ids = ints(c["inputs"]["group_ids"]);
  auto adv = group_advantages(scores, ids, config_of<AdvantageConfig>(c["config"]));
  expect_close(adv, c["expected"]["advantages"], "advantages");
}

void check_gae(const Json& c) {
  const Json& in = c["inputs"];
  auto cu = ints(in["cu"]);
  auto mask = floats(in["mask"]), rewards = floats(in["rewards"]), values = floats(in["values"]);
  const auto cfg = config_of<PpoConfig>(c["config"]);
  GaeResult g = gae(cu, mask, rewards, values, cfg.gamma, cfg.lambda, cfg.whiten);
  expect_close(g.advantages, c["expected"]["advantages"], "advantages");
  expect_close(g.returns, c["expected"]["returns"], "returns");
}

// REINFORCE++: discounted returns, then whitened over the batch (the algorithm's two calls).
void check_reinforce_adv(const Json& c) {
  const Json& in = c["inputs"];
  auto cu = ints(in["cu"]);
  auto mask = floats(in["mask"]), rewards = floats(in["rewards"]);
  std::vector<float> returns = discounted_returns(cu, mask, rewards, c["config"]["gamma"].get<double>());
  expect_close(returns, c["expected"]["returns"], "returns");
  whiten_masked(returns, mask);
  expect_close(returns, c["expected"]["advantages"], "advantages");
}

void check_token_rewards(const Json& c) {
  const Json& in = c["inputs"];
  auto cu = ints(in["cu"]);
  auto mask = floats(in["mask"]), scores = floats(in["scores"]), old = floats(in["old_logp"]),
       ref = floats(in["ref_logp"]);
  const auto cfg = config_of<PolicyLossConfig>(c["config"]);
  TokenRewards r = token_level_rewards(cu, mask, scores, old, ref, cfg.kl_coef,
                                       parse_kl_estimator(cfg.kl_estimator, "kl_estimator"));
  expect_close(r.rewards, c["expected"]["rewards"], "rewards");
  expect_close(sum_per_sequence(cu, r.rewards), c["expected"]["seq_rewards"], "seq_rewards");
  expect_metrics(r.metrics, c["expected"]["metrics"]);
}

void check_data_metrics(const Json& c) {
  const Json& in = c["inputs"];
  auto cu = ints(in["cu"]);
  auto mask = floats(in["mask"]), scores = floats(in["scores"]), seq_rewards = floats(in["seq_rewards"]),
       adv = floats(in["advantages"]), ret = floats(in["returns"]), values = floats(in["values"]);
  expect_metrics(data_metrics({cu, mask, scores, seq_rewards, adv, ret, values}), c["expected"]["metrics"]);
}

std::string committed_golden() { return std::string(RLCPP_SOURCE_DIR) + "/tests/golden/losses_golden.json"; }

const Json& committed_doc() {
  static const Json doc = load_json_file(committed_golden());
  return doc;
}

// Runs the checks of one kind over every case of `doc`; returns how many cases it checked.
int check_kind(const Json& doc, const std::string& kind) {
  int n = 0;
  for (const Json& c : doc["cases"]) {
    if (c["kind"] != kind) continue;
    SCOPED_TRACE("golden case " + c["name"].get<std::string>());
    ++n;
    if (kind == "policy") check_policy(c);
    else if (kind == "value") check_value(c);
    else if (kind == "sft") check_sft(c);
    else if (kind == "dpo") check_dpo(c);
    else if (kind == "kl") check_kl(c);
    else if (kind == "group_adv") check_group_adv(c);
    else if (kind == "gae") check_gae(c);
    else if (kind == "token_rewards") check_token_rewards(c);
    else if (kind == "data_metrics") check_data_metrics(c);
    else if (kind == "reinforce_adv") check_reinforce_adv(c);
    else ADD_FAILURE() << "unknown case kind " << kind;
  }
  return n;
}

const char* const kKinds[] = {"policy", "value", "sft", "dpo", "kl", "group_adv", "gae", "token_rewards",
                              "data_metrics", "reinforce_adv"};

TEST(LossesGolden, PolicyLossAndGradientMatchTorch) { EXPECT_GE(check_kind(committed_doc(), "policy"), 20); }
TEST(LossesGolden, ValueLossAndGradientMatchTorch) { EXPECT_GE(check_kind(committed_doc(), "value"), 7); }
TEST(LossesGolden, SftLossAndGradientMatchTorch) { EXPECT_GE(check_kind(committed_doc(), "sft"), 5); }
TEST(LossesGolden, DpoLossAndGradientMatchTorch) { EXPECT_GE(check_kind(committed_doc(), "dpo"), 9); }
TEST(LossesGolden, KlEstimatorsAndDerivativesMatchTorch) { EXPECT_GE(check_kind(committed_doc(), "kl"), 4); }
TEST(LossesGolden, GroupAdvantagesMatchVerlFormulas) { EXPECT_GE(check_kind(committed_doc(), "group_adv"), 5); }
TEST(LossesGolden, GaeMatchesVerlFormulas) { EXPECT_GE(check_kind(committed_doc(), "gae"), 3); }
TEST(LossesGolden, KlInRewardMatchesVerlFormulas) { EXPECT_GE(check_kind(committed_doc(), "token_rewards"), 2); }
TEST(LossesGolden, DataMetricsMatchTorch) { EXPECT_GE(check_kind(committed_doc(), "data_metrics"), 1); }
TEST(LossesGolden, ReinforcePlusPlusAdvantagesMatchVerlFormulas) {
  EXPECT_GE(check_kind(committed_doc(), "reinforce_adv"), 2);
}

// Every option of the issue has a case; a regenerated file that dropped one fails here.
TEST(LossesGolden, CoversEveryOptionAndEdgeCase) {
  std::set<std::string> names;
  for (const Json& c : committed_doc()["cases"]) names.insert(c["name"].get<std::string>());
  for (const char* agg : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"}) {
    for (const char* prefix : {"policy_clip_", "policy_dapo_dual_kl_entropy_", "value_clip_", "sft_"})
      EXPECT_TRUE(names.count(std::string(prefix) + agg)) << prefix << agg;
  }
  for (const char* name :
       {"policy_kl_loss_k1", "policy_kl_loss_k2", "policy_kl_loss_k3", "policy_kl_in_reward_not_in_loss",
        "policy_every_token_clipped", "policy_every_token_dual_clipped", "policy_one_token_response",
        "policy_empty_responses", "policy_tis", "policy_log_ratio_clamp", "policy_log_ratio_clamp_no_dual_clip",
        "policy_rc_is_token", "policy_rc_is_sequence", "policy_rc_mask_token", "policy_rc_mask_sequence",
        "policy_rc_mask_geometric", "policy_rc_icepop", "policy_rc_is_sequence_mask_geometric",
        "policy_rc_icepop_mask_sequence",
        "value_no_clip", "value_first_update_tie", "value_at_clip_bound",
        "dpo_beta_0.1", "kl_k3", "adv_grpo", "adv_drgrpo", "adv_rloo", "adv_grpo_no_std", "gae_0.99_0.95_whiten",
        "token_rewards_k1", "data_metrics", "policy_gspo_token_mean", "policy_gspo_paper_band_kl_entropy",
        "policy_gspo_seq_log_ratio_clamp", "policy_gspo_rollout_correction", "policy_cispo_token_mean",
        "policy_cispo_both_bounds_kl", "adv_reinforce_pp_gamma1", "adv_reinforce_pp_gamma0.9",
        "dpo_cdpo_label_smoothing", "dpo_robust", "dpo_ipo", "dpo_ipo_micro_batch_of_global", "dpo_simpo",
        "dpo_simpo_label_smoothing"})
    EXPECT_TRUE(names.count(name)) << name;
}

// Each DPO variant's case tests the variant: computed as plain sigmoid DPO with the same beta, its loss moves away
// from torch's by more than the tolerance.
TEST(LossesGolden, EveryDpoVariantCaseFailsAsPlainDpo) {
  int cases = 0;
  for (const Json& c : committed_doc()["cases"]) {
    if (c["kind"] != "dpo") continue;
    const DpoConfig variant = config_of<DpoConfig>(c["config"]);
    if (variant.loss_type == "sigmoid" && variant.label_smoothing == 0) continue;
    SCOPED_TRACE("golden case " + c["name"].get<std::string>());
    ++cases;
    const Json& in = c["inputs"];
    auto cu = ints(in["cu"]);
    auto logp = floats(in["logp"]), ref = floats(in["ref_logp"]), mask = floats(in["mask"]);
    std::vector<DpoPair> pairs;
    for (const auto& p : in["pairs"]) pairs.push_back({p[0].get<int64_t>(), p[1].get<int64_t>()});
    DpoConfig plain;
    plain.beta = variant.beta;
    const LossOutput out = dpo_loss({cu, logp, ref, mask, pairs}, plain, c["global_num_pairs"].get<double>());
    const double want = c["expected"]["loss"].get<double>();
    EXPECT_GT(std::abs(out.loss - want), 1e-3 * std::max(1.0, std::abs(want))) << out.loss << " vs " << want;
  }
  EXPECT_EQ(cases, 6);
}

// The rollout-correction cases test the correction, not only the PPO-clip loss around it: with the correction
// switched off, the loss and the gradient of each case move away from torch's by more than the tolerance.
TEST(LossesGolden, EveryRolloutCorrectionCaseFailsWithTheCorrectionIgnored) {
  int cases = 0;
  for (const Json& c : committed_doc()["cases"]) {
    if (c["kind"] != "policy" || !c["config"].contains("rollout_correction")) continue;
    SCOPED_TRACE("golden case " + c["name"].get<std::string>());
    ++cases;
    auto cfg = config_of<PolicyLossConfig>(c["config"]);
    ASSERT_TRUE(cfg.rollout_correction.active());
    cfg.rollout_correction = RolloutCorrectionConfig{};
    const LossOutput ignored = run_policy(c, cfg);
    const Json& e = c["expected"];
    const double loss = e["loss"].get<double>();
    EXPECT_GT(std::abs(ignored.loss - loss), kAbsTol + kRelTol * std::abs(loss));
    int moved = 0;
    for (size_t t = 0; t < ignored.dlogp.size(); ++t) {
      const double want = e["dlogp"][t].get<double>();
      moved += std::abs(ignored.dlogp[t] - want) > kAbsTol + kRelTol * std::abs(want) ? 1 : 0;
    }
    EXPECT_GT(moved, 0);
  }
  EXPECT_EQ(cases, 9);
}

// The GSPO and CISPO cases test their own loss: computed as the vanilla token-ratio loss instead, each case's
// gradient moves away from torch's on some token (GSPO: the sequence's ratio in place of the token's; CISPO: the
// clipped weight detached, so clipped tokens keep a gradient).
TEST(LossesGolden, GspoAndCispoCasesDifferFromTheTokenRatioLoss) {
  int cases = 0;
  for (const Json& c : committed_doc()["cases"]) {
    if (c["kind"] != "policy" || c["config"].value("loss_mode", "vanilla") == "vanilla") continue;
    SCOPED_TRACE("golden case " + c["name"].get<std::string>());
    ++cases;
    auto cfg = config_of<PolicyLossConfig>(c["config"]);
    cfg.loss_mode = "vanilla";
    const LossOutput vanilla = run_policy(c, cfg);
    int moved = 0;
    for (size_t t = 0; t < vanilla.dlogp.size(); ++t) {
      const double want = c["expected"]["dlogp"][t].get<double>();
      moved += std::abs(vanilla.dlogp[t] - want) > kAbsTol + kRelTol * std::abs(want) ? 1 : 0;
    }
    EXPECT_GT(moved, 0);
  }
  EXPECT_EQ(cases, 6);
}

bool torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
}

TEST(LossesGolden, FreshGoldenFileMatches) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch; checked the committed file only";
  const auto path = std::filesystem::temp_directory_path() /
                    ("rlcpp_losses_golden_" + std::to_string(::getpid()) + ".json");
  const std::string cmd = "/usr/bin/python3 " + std::string(RLCPP_SOURCE_DIR) +
                          "/tests/golden/losses_golden.py " + path.string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Json fresh = load_json_file(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(fresh["cases"].size(), committed_doc()["cases"].size())
      << "the script's cases differ from the committed file: regenerate tests/golden/losses_golden.json";
  for (const char* kind : kKinds) EXPECT_GT(check_kind(fresh, kind), 0) << kind;
}

}  // namespace
}  // namespace rlcpp
