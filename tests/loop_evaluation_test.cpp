// evaluate() generates through the rollout engine and scores what it returns: each problem's response is the
// engine's continuation of BOS + prompt (EOS stripped, `terminated` set when EOS ended it), the statistics count
// exactly those responses, and a problem's samples do not depend on the batch limit or on how many problems
// are evaluated (prompt id = problem index).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "loop/evaluation.h"
#include "model/numerics.h"
#include "rollout/engine.h"
#include "tests/test_models.h"

namespace rlcpp {
namespace {

// What evaluate handed the scorer for one sample.
struct ScoredResponse {
  std::string prompt, response;
  bool terminated = false;
  bool operator==(const ScoredResponse&) const = default;
};
void PrintTo(const ScoredResponse& r, std::ostream* os) {
  *os << "{" << r.prompt << " -> '" << r.response << "'" << (r.terminated ? " <eos>" : "") << "}";
}

// A task with fixed prompts whose answers the test chooses. It records every score call, so a test sees each
// sample evaluate produced. eval_set(m) is a prefix of eval_set(n), as Task requires.
class ScriptedTask : public Task {
 public:
  explicit ScriptedTask(int64_t problems) {
    for (int64_t i = 0; i < problems; ++i) {
      Problem p;
      p.prompt = std::to_string(7 * i + 3) + "+" + std::to_string(i % 11) + "=";
      p.answer = "no answer";  // the model's vocabulary cannot write a space-separated phrase by chance
      p.id = static_cast<uint64_t>(1000 + i);
      problems_.push_back(p);
    }
  }
  void set_answer(size_t i, const std::string& answer) { problems_[i].answer = answer; }

  std::string name() const override { return "scripted"; }
  Problem sample_train(PhiloxStream&) const override { RLCPP_FAIL("scripted task: no training problems"); }
  std::vector<Problem> eval_set(int64_t n) const override {
    return {problems_.begin(), problems_.begin() + std::min<int64_t>(n, static_cast<int64_t>(problems_.size()))};
  }
  bool is_test(const Problem&) const override { return true; }
  RewardResult score(const Problem& problem, const std::string& response, bool terminated) const override {
    scored.push_back({problem.prompt, response, terminated});
    RewardResult r;
    r.correct = terminated && response == problem.answer;
    r.total = r.correct ? 1.0 : terminated ? 0.25 : 0.0;
    return r;
  }
  int64_t max_new_tokens() const override { return 6; }
  std::string alphabet() const override { return "0123456789+="; }
  // Even and odd problems, so the per-class accuracies have something to separate.
  std::string problem_class(const Problem& problem) const override {
    return (problem.id % 2 == 0) ? "even" : "odd";
  }

  mutable std::vector<ScoredResponse> scored;

 private:
  std::vector<Problem> problems_;
};

// The shared small model with the character tokenizer's vocabulary; weights scaled so continuations vary.
ModelConfig eval_config() {
  ModelConfig c = small_test_config("qwen2");
  c.vocab_size = CharTokenizer::kVocabSize;
  return c;
}

ParameterStore scaled_params(const ModelConfig& c) { return scaled_test_params(c, 3.0f, 5); }

// The samples the engine itself gives the same prompts, prompt ids 0..P-1.
RolloutResult engine_samples(const Transformer& model, const ParameterStore& params, const ScriptedTask& task,
                             int64_t problems, const SamplingParams& sampling, int64_t n) {
  const CharTokenizer tok;
  Request req;
  req.n = n;
  req.sampling = sampling;
  for (const Problem& p : task.eval_set(problems)) req.prompts.push_back(encode_prompt(tok, p.prompt));
  Engine engine(model, params, EngineConfig{});
  return engine.generate(req);
}

// The model's eos id set to the token its greedy continuations (EOS ignored, `len` tokens) emit most often, so
// that some responses end with EOS and others at the length limit.
ModelConfig with_frequent_eos(const ModelConfig& cfg, const ParameterStore& params, const ScriptedTask& task,
                              int64_t problems, int64_t len) {
  SamplingParams free_run;
  free_run.temperature = 0;
  free_run.max_new_tokens = len;
  free_run.ignore_eos = true;
  std::map<int32_t, int64_t> count;
  for (const Sample& s : engine_samples(Transformer(cfg), params, task, problems, free_run, 1).samples)
    for (int32_t t : s.tokens) ++count[t];
  ModelConfig out = cfg;
  out.eos_token_id =
      std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
          ->first;
  return out;
}

ScoredResponse expected_response(const std::string& prompt, const Sample& s) {
  const bool eos = s.finish_reason == FinishReason::kEos;
  std::vector<int32_t> body = s.tokens;
  if (eos) body.pop_back();
  return {prompt, CharTokenizer().decode(body), eos};
}

TEST(LoopEvaluation, GreedyScoresTheEnginesContinuationInTheModelsNumerics) {
  const ModelConfig base = eval_config();
  const ParameterStore params = scaled_params(base);
  const int64_t P = 24;
  const ModelConfig cfg = with_frequent_eos(base, params, ScriptedTask(P), P, 6);
  for (const ModelNumerics numerics : {ModelNumerics{}, make_numerics("bf16", "int8", true, "dtype", "quantization")}) {
    const std::string where = numerics.describe();
    const Transformer model(cfg, numerics);
    ScriptedTask task(P);
    SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_new_tokens = 6;
    const RolloutResult want = engine_samples(model, params, task, P, greedy, 1);
    // Even problems' answers are the model's own greedy responses (when EOS ended them): exactly those count.
    int64_t correct = 0, terminated = 0, correct_even = 0;
    double reward = 0;
    std::vector<int64_t> lengths;
    for (int64_t i = 0; i < P; ++i) {
      const ScoredResponse r = expected_response(task.eval_set(P)[i].prompt, want.samples[i]);
      lengths.push_back(static_cast<int64_t>(want.samples[i].tokens.size()));
      terminated += r.terminated;
      if (i % 2 == 0) task.set_answer(i, r.response);
      const bool ok = i % 2 == 0 && r.terminated;
      correct += ok;
      correct_even += ok;
      reward += ok ? 1.0 : r.terminated ? 0.25 : 0.0;
    }
    ASSERT_GT(correct, 0) << where << ": no greedy response ended with EOS; the test needs some that do";
    ASSERT_LT(terminated, P) << where << ": every response ended with EOS; the test needs some that hit the limit";

    EvalOptions opts;
    opts.problems = P;
    opts.max_new_tokens = 6;
    const EvalStats s = evaluate(model, params, task, CharTokenizer(), opts);
    ASSERT_EQ(task.scored.size(), static_cast<size_t>(P)) << where;
    for (int64_t i = 0; i < P; ++i)
      EXPECT_EQ(task.scored[i], expected_response(task.eval_set(P)[i].prompt, want.samples[i]))
          << where << ": problem " << i << " scored '" << task.scored[i].response << "'";
    EXPECT_EQ(s.problems, P);
    EXPECT_EQ(s.samples_per_problem, 1);
    EXPECT_DOUBLE_EQ(s.accuracy, static_cast<double>(correct) / P) << where;
    EXPECT_DOUBLE_EQ(s.pass_at_k.at(0), s.accuracy);
    EXPECT_NEAR(s.mean_reward, reward / P, 1e-12) << where;
    EXPECT_EQ(s.length.min, *std::min_element(lengths.begin(), lengths.end()));
    EXPECT_EQ(s.length.max, *std::max_element(lengths.begin(), lengths.end()));
    ASSERT_EQ(s.classes.size(), 2u);
    EXPECT_EQ(s.classes[0].label, "even");  // problem ids 1000 + i: even i is an even id
    EXPECT_DOUBLE_EQ(s.classes[0].accuracy, static_cast<double>(correct_even) / (P / 2));
    EXPECT_EQ(s.classes[1].label, "odd");
    EXPECT_DOUBLE_EQ(s.classes[1].accuracy, 0.0);
  }
}

// A problem's samples are keyed by (seed, problem index, sample index, position): the same whatever the
// engine's batch limit, and whether 10 or 30 problems are evaluated; greedy is the same every time.
TEST(LoopEvaluation, SamplesDoNotDependOnTheBatchLimitOrTheNumberOfProblems) {
  const ModelConfig cfg = eval_config();
  const ParameterStore params = scaled_params(cfg);
  const Transformer model(cfg);
  struct Mode {
    float temperature;
    int64_t samples;
  };
  for (const Mode mode : {Mode{0.0f, 1}, Mode{1.0f, 4}}) {
    const std::string where = "temperature " + std::to_string(mode.temperature);
    auto run = [&](int64_t problems, int64_t max_num_seqs, uint64_t seed) {
      ScriptedTask task(30);
      EvalOptions opts;
      opts.problems = problems;
      opts.samples = mode.samples;
      opts.temperature = mode.temperature;
      opts.max_new_tokens = 8;
      opts.seed = seed;
      opts.max_num_seqs = max_num_seqs;
      const EvalStats s = evaluate(model, params, task, CharTokenizer(), opts);
      EXPECT_EQ(s.problems, problems);
      EXPECT_EQ(s.samples_per_problem, mode.samples);
      EXPECT_EQ(static_cast<int64_t>(task.scored.size()), problems * mode.samples);
      return task.scored;
    };
    const std::vector<ScoredResponse> all = run(30, 512, 7);
    EXPECT_EQ(run(30, 512, 7), all) << where << ": not reproducible";
    EXPECT_EQ(run(30, 3, 7), all) << where << ": depends on the batch limit";
    const std::vector<ScoredResponse> first = run(10, 512, 7);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), all.begin())) << where << ": depends on the problem count";
    if (mode.temperature > 0) {
      EXPECT_NE(run(30, 512, 8), all) << "another seed gave the same samples";
      // The group really samples apart: some problem's 4 responses are not all alike.
      bool differ = false;
      for (size_t i = 0; i + 1 < all.size(); ++i) differ |= i % 4 != 3 && !(all[i] == all[i + 1]);
      EXPECT_TRUE(differ);
    }
  }
}

// EOS ends a response (and is counted in its length, not in the text scored); max_new_tokens bounds the rest.
// The model's eos id is set to a token its greedy continuations emit often, so both endings occur.
TEST(LoopEvaluation, EosEndsAResponseAndMaxNewTokensBoundsIt) {
  const ModelConfig cfg = eval_config();
  const ParameterStore params = scaled_params(cfg);
  const int64_t P = 20, free_len = 12;
  ScriptedTask task(P);
  SamplingParams free_run;
  free_run.temperature = 0;
  free_run.max_new_tokens = free_len;
  free_run.ignore_eos = true;
  const RolloutResult runs = engine_samples(Transformer(cfg), params, task, P, free_run, 1);
  const ModelConfig eos_cfg = with_frequent_eos(cfg, params, task, P, free_len);
  const int32_t eos = static_cast<int32_t>(eos_cfg.eos_token_id);
  const Transformer model(eos_cfg);
  for (int64_t limit : {int64_t{3}, free_len}) {
    task.scored.clear();
    EvalOptions opts;
    opts.problems = P;
    opts.max_new_tokens = limit;
    const EvalStats s = evaluate(model, params, task, CharTokenizer(), opts);
    ASSERT_EQ(task.scored.size(), static_cast<size_t>(P));
    int64_t ended_by_eos = 0, longest = 0;
    for (int64_t i = 0; i < P; ++i) {
      const std::vector<int32_t>& tokens = runs.samples[i].tokens;
      const auto stop = std::find(tokens.begin(), tokens.begin() + limit, eos);
      const bool terminated = stop != tokens.begin() + limit;
      const std::vector<int32_t> body(tokens.begin(), stop);
      EXPECT_EQ(task.scored[i], (ScoredResponse{task.eval_set(P)[i].prompt, CharTokenizer().decode(body), terminated}))
          << "limit " << limit << ", problem " << i;
      ended_by_eos += terminated;
      longest = std::max<int64_t>(longest, static_cast<int64_t>(body.size()) + terminated);
    }
    EXPECT_GT(ended_by_eos, 0) << "limit " << limit;
    if (limit == 3) EXPECT_LT(ended_by_eos, P) << "some responses must reach the limit";
    EXPECT_EQ(s.length.max, longest) << "limit " << limit;  // lengths count the EOS
    EXPECT_LE(s.length.max, limit);
    EXPECT_DOUBLE_EQ(s.mean_reward, 0.25 * static_cast<double>(ended_by_eos) / P);  // none answers "no answer"
  }
}

TEST(LoopEvaluation, RejectsBadOptionsNamingThem) {
  const ModelConfig cfg = eval_config();
  const ParameterStore params = scaled_params(cfg);
  const Transformer model(cfg);
  const ScriptedTask task(4);
  auto error_of = [&](const EvalOptions& opts) -> std::string {
    try {
      evaluate(model, params, task, CharTokenizer(), opts);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EvalOptions greedy_group;
  greedy_group.samples = 2;
  EXPECT_NE(error_of(greedy_group).find("temperature > 0"), std::string::npos) << error_of(greedy_group);
  EvalOptions none;
  none.samples = 0;
  EXPECT_NE(error_of(none).find("samples must be >= 1"), std::string::npos) << error_of(none);
  EvalOptions no_batch;
  no_batch.max_num_seqs = 0;
  EXPECT_NE(error_of(no_batch).find("max_num_seqs"), std::string::npos) << error_of(no_batch);
}

}  // namespace
}  // namespace rlcpp
