// Arithmetic and countdown tasks: the add3 split of docs/benchmarks.md, disjoint and reproducible splits,
// deterministic generators, and the task registry's config errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "reward/arithmetic_task.h"
#include "reward/countdown_task.h"
#include "reward/split_hash.h"
#include "reward/task_registry.h"

namespace rlcpp {
namespace {

std::string error_of(const TaskConfig& cfg) {
  try {
    make_task(cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<Problem> draw_train(const Task& task, uint64_t seed, int n) {
  PhiloxStream rng(seed, 0);
  std::vector<Problem> out;
  for (int i = 0; i < n; ++i) out.push_back(task.sample_train(rng));
  return out;
}

std::vector<std::string> prompts_of(const std::vector<Problem>& problems) {
  std::vector<std::string> out;
  for (const Problem& p : problems) out.push_back(p.prompt);
  return out;
}

ArithmeticTask add3() { return ArithmeticTask(ArithmeticOp::kAdd, 3, 20240917, ScorerSpec{}); }

TEST(SplitHash, Splitmix64MatchesTheReferenceSequence) {
  // The first two outputs of the reference splitmix64 generator seeded with 0.
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ull), 0x6E789E6AA1B965F4ull);
}

TEST(Add3Split, HoldsOutAboutTenPercentIndependentOfTheLastDigit) {
  ArithmeticTask task = add3();
  // Counted independently in Python with the docs/benchmarks.md formula.
  EXPECT_EQ(task.count_test_pairs(), 100012);
  int64_t b_ends_in_zero = 0, b_ends_in_zero_test = 0;
  for (uint64_t a = 0; a < 1000; ++a)
    for (uint64_t b = 0; b < 1000; b += 10) {
      ++b_ends_in_zero;
      b_ends_in_zero_test += task.is_test(task.make_problem(a, b)) ? 1 : 0;
    }
  EXPECT_EQ(b_ends_in_zero_test, 10086);
  EXPECT_LT(b_ends_in_zero_test, b_ends_in_zero / 5);  // a plain modulus would make this all of them
  // The first test pairs with a = 0, also from Python.
  std::vector<uint64_t> first;
  for (uint64_t b = 0; b < 1000 && first.size() < 6; ++b)
    if (task.is_test(task.make_problem(0, b))) first.push_back(b);
  EXPECT_EQ(first, (std::vector<uint64_t>{2, 18, 29, 30, 31, 43}));
}

TEST(Add3Task, ProblemsFollowTheBenchmarkDefinition) {
  ArithmeticTask task = add3();
  EXPECT_EQ(task.name(), "add3");
  EXPECT_EQ(task.max_new_tokens(), 6);
  Problem p = task.make_problem(123, 45);
  EXPECT_EQ(p.prompt, "123+45=");
  EXPECT_EQ(p.answer, "168");
  EXPECT_EQ(p.id, 123045u);
  EXPECT_EQ(task.make_problem(999, 999).answer, "1998");
  EXPECT_EQ(task.make_problem(0, 0).answer, "0");
  EXPECT_EQ(task.score(p, "168", true).total, 1.0);
  EXPECT_DOUBLE_EQ(task.score(p, "167", true).total, 0.1);
  EXPECT_EQ(task.score(p, "-168", true).total, 0.0);
  EXPECT_THROW(task.make_problem(1000, 0), Error);
}

TEST(Add3Task, TrainingDrawsOnlyTrainPairsUniformly) {
  ArithmeticTask task = add3();
  std::vector<Problem> train = draw_train(task, 7, 20000);
  double sum_a = 0;
  int b_ends_in_zero = 0;
  for (const Problem& p : train) {
    ASSERT_FALSE(task.is_test(p)) << p.prompt;
    uint64_t a = p.meta["a"].get<uint64_t>(), b = p.meta["b"].get<uint64_t>();
    ASSERT_LT(a, 1000u);
    ASSERT_EQ(p.prompt, std::to_string(a) + "+" + std::to_string(b) + "=");
    ASSERT_EQ(p.answer, std::to_string(a + b));
    sum_a += static_cast<double>(a);
    b_ends_in_zero += b % 10 == 0 ? 1 : 0;
  }
  // Mean of uniform [0, 999] is 499.5 with standard error 288.7 / sqrt(20000) = 2.0.
  EXPECT_NEAR(sum_a / train.size(), 499.5, 10.0);
  EXPECT_NEAR(b_ends_in_zero / 20000.0, 0.1, 0.01);
}

// Length-balanced draws: each operand's digit count is uniform in 1..3 and its value uniform within that
// length; still only train pairs, and the held-out set is the uniform task's.
TEST(Add3Task, LengthBalancedDrawsGiveEachOperandLengthAThird) {
  ArithmeticTask task(ArithmeticOp::kAdd, 3, 20240917, ScorerSpec{}, OperandSampling::kLengthBalanced);
  const int n = 30000;
  std::vector<Problem> train = draw_train(task, 7, n);
  int length_count[4] = {0, 0, 0, 0};
  int one_digit_zero = 0, two_digit_high = 0;
  for (const Problem& p : train) {
    ASSERT_FALSE(task.is_test(p)) << p.prompt;
    const uint64_t a = p.meta["a"].get<uint64_t>(), b = p.meta["b"].get<uint64_t>();
    ASSERT_EQ(p.answer, std::to_string(a + b));
    for (uint64_t x : {a, b}) ++length_count[std::to_string(x).size()];
    one_digit_zero += a == 0 ? 1 : 0;
    two_digit_high += a >= 50 && a < 100 ? 1 : 0;
  }
  // Each length holds 1/3 of the 2n operands (standard error sqrt(2n * 2/9) / 2n = 0.0019).
  for (int len = 1; len <= 3; ++len) EXPECT_NEAR(length_count[len] / (2.0 * n), 1.0 / 3, 0.01) << len << " digits";
  // Within a length, uniform: 0 is one of the ten one-digit values (1/30 of a's), 50..99 are 50 of the 90
  // two-digit ones (5/27).
  EXPECT_NEAR(one_digit_zero / static_cast<double>(n), 1.0 / 30, 0.005);
  EXPECT_NEAR(two_digit_high / static_cast<double>(n), 5.0 / 27, 0.01);
  // The uniform task draws a one- or two-digit first operand 10 % of the time.
  int short_uniform = 0;
  for (const Problem& p : draw_train(add3(), 7, n)) short_uniform += p.meta["a"].get<uint64_t>() < 100 ? 1 : 0;
  EXPECT_NEAR(short_uniform / static_cast<double>(n), 0.1, 0.01);
  // The held-out set does not depend on how training draws.
  EXPECT_EQ(prompts_of(task.eval_set(200)), prompts_of(add3().eval_set(200)));
}

TEST(Add3Task, ProblemClassIsTheOperandsDigitCounts) {
  ArithmeticTask task = add3();
  EXPECT_EQ(task.problem_class(task.make_problem(422, 92)), "3+2");
  EXPECT_EQ(task.problem_class(task.make_problem(0, 999)), "1+3");
  EXPECT_EQ(task.problem_class(task.make_problem(100, 10)), "3+2");
  ArithmeticTask sub(ArithmeticOp::kSub, 2, 1, ScorerSpec{});
  EXPECT_EQ(sub.problem_class(sub.make_problem(5, 42)), "1-2");
  // The 1000 held-out problems of add3: 812 with two 3-digit operands, 81 each of 3+2 and 2+3, and a few
  // with a 1-digit operand or two 2-digit ones.
  std::map<std::string, int> classes;
  for (const Problem& p : task.eval_set(1000)) ++classes[task.problem_class(p)];
  const std::map<std::string, int> expected = {{"1+3", 9}, {"2+1", 1}, {"2+2", 7}, {"2+3", 81},
                                               {"3+1", 9}, {"3+2", 81}, {"3+3", 812}};
  EXPECT_EQ(classes, expected);
}

TEST(Add3Task, SameSeedSameProblemsOtherSeedOtherProblems) {
  ArithmeticTask task = add3();
  EXPECT_EQ(prompts_of(draw_train(task, 11, 200)), prompts_of(draw_train(task, 11, 200)));
  EXPECT_NE(prompts_of(draw_train(task, 11, 200)), prompts_of(draw_train(task, 12, 200)));
}

TEST(Add3Task, EvalSetIsFixedDistinctHeldOutAndPrefixStable) {
  ArithmeticTask task = add3();
  std::vector<Problem> eval = task.eval_set(1000);
  ASSERT_EQ(eval.size(), 1000u);
  std::set<std::string> distinct;
  for (const Problem& p : eval) {
    EXPECT_TRUE(task.is_test(p)) << p.prompt;
    distinct.insert(p.prompt);
  }
  EXPECT_EQ(distinct.size(), 1000u);
  EXPECT_EQ(prompts_of(add3().eval_set(1000)), prompts_of(eval));
  std::vector<Problem> head = task.eval_set(100);
  EXPECT_TRUE(std::equal(head.begin(), head.end(), eval.begin(),
                         [](const Problem& x, const Problem& y) { return x.prompt == y.prompt; }));
  ArithmeticTask other(ArithmeticOp::kAdd, 3, 5, ScorerSpec{});
  EXPECT_NE(prompts_of(other.eval_set(100)), prompts_of(head));
}

TEST(Add3Task, TrainAndEvalNeverShareAPair) {
  ArithmeticTask task = add3();
  std::set<std::string> eval;
  for (const Problem& p : task.eval_set(1000)) eval.insert(p.prompt);
  for (const Problem& p : draw_train(task, 3, 20000)) ASSERT_EQ(eval.count(p.prompt), 0u) << p.prompt;
}

TEST(ArithmeticTask, SmallSplitReturnsEveryTestPair) {
  ArithmeticTask task(ArithmeticOp::kAdd, 1, 9, ScorerSpec{});
  EXPECT_EQ(task.count_test_pairs(), 10);
  std::vector<Problem> eval = task.eval_set(1000);
  std::set<uint64_t> keys;
  for (const Problem& p : eval) keys.insert(p.id);
  // The 1-digit test keys a*10 + b, from Python.
  EXPECT_EQ(keys, (std::set<uint64_t>{2, 18, 29, 30, 31, 43, 68, 72, 75, 82}));
  EXPECT_EQ(eval.size(), 10u);
}

TEST(SubTask, AnswersCanBeNegativeAndNegativeResponsesAreWellFormed) {
  ArithmeticTask task(ArithmeticOp::kSub, 3, 1, ScorerSpec{});
  EXPECT_EQ(task.name(), "sub3");
  Problem p = task.make_problem(3, 10);
  EXPECT_EQ(p.prompt, "3-10=");
  EXPECT_EQ(p.answer, "-7");
  EXPECT_EQ(task.score(p, "-7", true).total, 1.0);
  EXPECT_DOUBLE_EQ(task.score(p, "7", true).total, 0.1);
  EXPECT_DOUBLE_EQ(task.score(p, "-8", true).total, 0.1);
  EXPECT_EQ(task.score(p, "-07", true).total, 0.0);
  EXPECT_EQ(task.make_problem(10, 10).answer, "0");
  EXPECT_EQ(task.max_new_tokens(), 6);  // "-999" + EOS + spare
  bool saw_negative = false;
  for (const Problem& q : draw_train(task, 1, 200)) saw_negative = saw_negative || q.answer[0] == '-';
  EXPECT_TRUE(saw_negative);
}

TEST(MulTask, WideOperandsStayExact) {
  ArithmeticTask task(ArithmeticOp::kMul, 9, 1, ScorerSpec{});
  EXPECT_EQ(task.name(), "mul9");
  Problem p = task.make_problem(999999999, 999999999);
  EXPECT_EQ(p.prompt, "999999999*999999999=");
  EXPECT_EQ(p.answer, "999999998000000001");
  EXPECT_EQ(task.max_new_tokens(), 20);
  EXPECT_EQ(task.score(p, "-1", true).total, 0.0);
  std::vector<Problem> eval = task.eval_set(50);
  EXPECT_EQ(eval.size(), 50u);
  for (const Problem& q : eval) EXPECT_TRUE(task.is_test(q));
  ArithmeticTask mul2(ArithmeticOp::kMul, 2, 1, ScorerSpec{});
  EXPECT_EQ(mul2.make_problem(12, 34).answer, "408");
}

TEST(ArithmeticTask, SplitSurvivesAJsonRoundTripOfTheProblem) {
  ArithmeticTask task = add3();
  for (const Problem& p : task.eval_set(20)) {
    Problem q = p;
    q.meta = Json::parse(p.meta.dump());
    EXPECT_TRUE(task.is_test(q));
  }
  Problem bad;
  bad.prompt = "1+1=";
  EXPECT_THROW(task.is_test(bad), Error);
}

// ---- countdown ----

CountdownTask countdown() { return CountdownTask(20240917, ScorerSpec{}); }

TEST(CountdownTask, GeneratedPuzzlesAreSolvedByTheirReferenceAnswer) {
  CountdownTask task = countdown();
  std::set<size_t> sizes;
  for (const Problem& p : draw_train(task, 5, 500)) {
    std::vector<int64_t> numbers = p.meta["numbers"].get<std::vector<int64_t>>();
    int64_t target = p.meta["target"].get<int64_t>();
    sizes.insert(numbers.size());
    ASSERT_TRUE(numbers.size() == 3 || numbers.size() == 4) << p.prompt;
    for (int64_t x : numbers) ASSERT_TRUE(x >= 1 && x <= 99) << p.prompt;
    ASSERT_TRUE(target >= 1 && target <= 100) << p.prompt;
    ASSERT_EQ(p.prompt.front(), '(');
    ASSERT_EQ(p.prompt.substr(p.prompt.find(')')), ")" + std::to_string(target) + "=");
    RewardResult r = task.score(p, p.answer, true);
    ASSERT_EQ(r.total, 1.0) << p.prompt << " " << p.answer;
    ASSERT_LE(static_cast<int64_t>(p.answer.size()) + 1, task.max_new_tokens()) << p.answer;
    for (char c : p.prompt + p.answer) ASSERT_NE(task.alphabet().find(c), std::string::npos) << c;
  }
  EXPECT_EQ(sizes, (std::set<size_t>{3, 4}));
}

TEST(CountdownTask, SplitKeyIgnoresTheOrderOfTheNumbers) {
  EXPECT_EQ(CountdownTask::split_key({7, 3, 5}, 22), CountdownTask::split_key({3, 5, 7}, 22));
  EXPECT_EQ(CountdownTask::split_key({3, 5, 7}, 22), 30507022u);
  EXPECT_NE(CountdownTask::split_key({3, 5, 7}, 22), CountdownTask::split_key({3, 5, 7}, 23));
  EXPECT_NE(CountdownTask::split_key({1, 3, 5, 7}, 22), CountdownTask::split_key({3, 5, 7}, 22));
  CountdownTask task = countdown();
  EXPECT_EQ(task.is_test(task.make_problem({7, 3, 5}, 22, "")), task.is_test(task.make_problem({3, 5, 7}, 22, "")));
}

TEST(CountdownTask, TrainAndEvalAreDisjointAndReproducible) {
  CountdownTask task = countdown();
  std::vector<Problem> eval = task.eval_set(300);
  ASSERT_EQ(eval.size(), 300u);
  std::set<uint64_t> eval_keys;
  for (const Problem& p : eval) {
    EXPECT_TRUE(task.is_test(p));
    eval_keys.insert(CountdownTask::split_key(p.meta["numbers"].get<std::vector<int64_t>>(),
                                              p.meta["target"].get<int64_t>()));
  }
  EXPECT_EQ(eval_keys.size(), 300u);
  for (const Problem& p : draw_train(task, 9, 2000)) {
    ASSERT_FALSE(task.is_test(p));
    ASSERT_EQ(eval_keys.count(CountdownTask::split_key(p.meta["numbers"].get<std::vector<int64_t>>(),
                                                       p.meta["target"].get<int64_t>())),
              0u);
  }
  EXPECT_EQ(prompts_of(countdown().eval_set(300)), prompts_of(eval));
  std::vector<Problem> head = task.eval_set(50);
  EXPECT_EQ(prompts_of(head), prompts_of(std::vector<Problem>(eval.begin(), eval.begin() + 50)));
  EXPECT_EQ(prompts_of(draw_train(task, 9, 100)), prompts_of(draw_train(task, 9, 100)));
  EXPECT_NE(prompts_of(draw_train(task, 9, 100)), prompts_of(draw_train(task, 10, 100)));
}

// ---- registry ----

TEST(TaskRegistry, DefaultIsAdd3) {
  TaskConfig cfg;
  std::unique_ptr<Task> task = make_task(cfg);
  EXPECT_EQ(task->name(), "add3");
  EXPECT_EQ(task->max_new_tokens(), 6);
  EXPECT_EQ(task->eval_set(cfg.eval_size).size(), 1000u);
  PhiloxStream a = make_train_stream(cfg), b = make_train_stream(cfg);
  EXPECT_EQ(task->sample_train(a).prompt, task->sample_train(b).prompt);
}

TEST(TaskRegistry, BuildsEveryGeneratedTask) {
  for (const char* name : {"add", "sub", "mul", "countdown"}) {
    TaskConfig cfg;
    cfg.name = name;
    cfg.digits = 2;
    std::unique_ptr<Task> task = make_task(cfg);
    PhiloxStream rng = make_train_stream(cfg);
    Problem p = task->sample_train(rng);
    EXPECT_EQ(task->score(p, p.answer, true).total, 1.0) << name;
  }
}

TEST(TaskRegistry, ConfigErrorsNameTheKey) {
  TaskConfig cfg;
  cfg.name = "div";
  EXPECT_NE(error_of(cfg).find("task.name"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.digits = 4;
  EXPECT_NE(error_of(cfg).find("task.digits"), std::string::npos) << error_of(cfg);
  cfg.name = "add";
  cfg.digits = 10;
  EXPECT_NE(error_of(cfg).find("task.digits"), std::string::npos) << error_of(cfg);
  cfg.digits = 0;
  EXPECT_NE(error_of(cfg).find("task.digits"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.scorer = "close";
  EXPECT_NE(error_of(cfg).find("task.scorer"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.name = "countdown";
  cfg.scorer = "numeric";
  EXPECT_NE(error_of(cfg).find("task.scorer"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.format_score = 2.0;
  EXPECT_NE(error_of(cfg).find("task.format_score"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.eval_size = -1;
  EXPECT_NE(error_of(cfg).find("task.eval_size"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.name = "dataset";
  EXPECT_NE(error_of(cfg).find("task.path"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.operands = "balanced";
  EXPECT_NE(error_of(cfg).find("task.operands"), std::string::npos) << error_of(cfg);
  cfg = TaskConfig{};
  cfg.name = "countdown";
  cfg.operands = "length-balanced";
  EXPECT_NE(error_of(cfg).find("task.operands"), std::string::npos) << error_of(cfg);
  cfg.operands = "uniform";
  EXPECT_EQ(error_of(cfg), "");
}

TEST(TaskRegistry, ChecksTheTaskAgainstTheTokenizerCharset) {
  TaskConfig cfg;
  cfg.name = "countdown";
  cfg.charset = "0123456789+-*= ";  // the arithmetic-only character set lacks "()/"
  std::string error = error_of(cfg);
  EXPECT_NE(error.find("task.charset"), std::string::npos) << error;
  EXPECT_NE(error.find("countdown"), std::string::npos) << error;
  cfg.charset = "";
  EXPECT_EQ(error_of(cfg), "");
  cfg.charset = kCharTokenizerCharset;
  EXPECT_EQ(error_of(cfg), "");
}

TEST(TaskConfig, LoadsFromJsonAndRejectsUnknownKeys) {
  TaskConfig cfg;
  config_from_json(Json::parse(R"({"name": "sub", "digits": 2, "scorer": "exact"})"), cfg);
  EXPECT_EQ(make_task(cfg)->name(), "sub2");
  EXPECT_THROW(config_from_json(Json::parse(R"({"digit": 2})"), cfg), Error);
}

}  // namespace
}  // namespace rlcpp
