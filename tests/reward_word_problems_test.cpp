// Tasks with text: the math answer extraction and scorer on hand-written completions, the generated `words`
// task (deterministic, correct references, disjoint splits), the shipped words JSONL (loads through the dataset
// task, matches the C++ generator, every reference scores correct) and countdown_words.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <unistd.h>

#include "reward/countdown_task.h"
#include "reward/dataset_task.h"
#include "reward/math_answer.h"
#include "reward/scorers.h"
#include "reward/split_hash.h"
#include "reward/task_registry.h"
#include "reward/word_problem_task.h"
#include "reward/word_problems.h"

namespace rlcpp {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

double component(const RewardResult& r, const std::string& name) {
  for (const auto& [n, v] : r.components)
    if (n == name) return v;
  ADD_FAILURE() << "no component " << name;
  return -1.0;
}

RewardResult math(const std::string& reference, const std::string& response, bool terminated = true) {
  return score_math(reference, response, terminated, 0.1);
}

bool math_correct(const std::string& reference, const std::string& response) {
  return math(reference, response).correct;
}

std::string error_of(const TaskConfig& cfg) {
  try {
    make_task(cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TaskConfig text_task(const std::string& name) {
  TaskConfig cfg;
  cfg.name = name;
  cfg.charset = "";
  return cfg;
}

// ---- canonical numbers and extraction ----

TEST(MathAnswer, CanonicalNumbersNormaliseCommasCurrencyDecimalsFractionsAndUnits) {
  EXPECT_EQ(canonical_number("1,234"), "1234");
  EXPECT_EQ(canonical_number("1,234,567.50"), "1234567.5");
  EXPECT_EQ(canonical_number("$18"), "18");
  EXPECT_EQ(canonical_number("-$5"), "-5");
  EXPECT_EQ(canonical_number("$-5"), "-5");
  EXPECT_EQ(canonical_number("-0"), "0");
  EXPECT_EQ(canonical_number("-0.0"), "0");
  EXPECT_EQ(canonical_number("007"), "7");
  EXPECT_EQ(canonical_number("3.50"), "3.5");
  EXPECT_EQ(canonical_number("42.0"), "42");
  EXPECT_EQ(canonical_number("42."), "42");
  EXPECT_EQ(canonical_number(".5"), "0.5");
  EXPECT_EQ(canonical_number("1/2"), "0.5");
  EXPECT_EQ(canonical_number("-3/4"), "-0.75");
  EXPECT_EQ(canonical_number("2/6"), "1/3");
  EXPECT_EQ(canonical_number("\\frac{1}{2}"), "0.5");
  EXPECT_EQ(canonical_number("\\dfrac{10}{4}"), "2.5");
  EXPECT_EQ(canonical_number("-\\frac{2}{6}"), "-1/3");
  EXPECT_EQ(canonical_number("1/0"), std::nullopt);
  EXPECT_EQ(canonical_number("42 apples"), "42");
  EXPECT_EQ(canonical_number("50%"), "50");
  EXPECT_EQ(canonical_number("12 \\text{ cm}"), "12");
  EXPECT_EQ(canonical_number("90^\\circ"), "90");
  EXPECT_EQ(canonical_number("$5$"), "5");
  EXPECT_EQ(canonical_number("\\boxed{7}"), "7");
  // Not one number: compared as text.
  EXPECT_EQ(canonical_number("2\\sqrt{3}"), std::nullopt);
  EXPECT_EQ(canonical_number("3 + 4"), std::nullopt);
  EXPECT_EQ(canonical_number("x = 5"), std::nullopt);
  EXPECT_EQ(canonical_number("apples"), std::nullopt);
  EXPECT_EQ(canonical_number(""), std::nullopt);
  // Long numbers stay exact.
  EXPECT_EQ(canonical_number("123456789012345678901234567890.10"), "123456789012345678901234567890.1");
}

TEST(MathAnswer, LastNumberTakesSignsOnlyWhereTheyAreSigns) {
  EXPECT_EQ(last_number("She had 5 apples and ate 2, so 3 are left."), "3");
  EXPECT_EQ(last_number("it is -3 degrees"), "-3");
  EXPECT_EQ(last_number("10-3"), "3");
  EXPECT_EQ(last_number("(4)-3"), "3");
  EXPECT_EQ(last_number("x-3"), "3");
  EXPECT_EQ(last_number("a loss of -$12"), "-12");
  EXPECT_EQ(last_number("about 1,234,567 people"), "1234567");
  EXPECT_EQ(last_number("the list 3,4,5"), "5");
  EXPECT_EQ(last_number("half is 1/2"), "0.5");
  EXPECT_EQ(last_number("pi is 3.14."), "3.14");
  EXPECT_EQ(last_number("no digits here"), std::nullopt);
}

TEST(MathAnswer, ExtractionPrefersHashesThenBoxedThenTheLastNumber) {
  ExtractedAnswer a = extract_math_answer("48/2 = 24 in May, 48+24 = 72 in all.\n#### 72");
  EXPECT_EQ(a.form, AnswerForm::kHashes);
  EXPECT_EQ(a.number, "72");
  EXPECT_TRUE(a.marked());

  a = extract_math_answer("so the answer is \\boxed{\\frac{1}{2}} and 9 more");
  EXPECT_EQ(a.form, AnswerForm::kBoxed);
  EXPECT_EQ(a.raw, "\\frac{1}{2}");  // nested braces kept as text
  EXPECT_EQ(a.number, "0.5");

  a = extract_math_answer("\\boxed{\\frac{\\sqrt{2}}{2}}");
  EXPECT_EQ(a.raw, "\\frac{\\sqrt{2}}{2}");
  EXPECT_EQ(a.number, std::nullopt);

  a = extract_math_answer("\\boxed{3} ... #### 4");  // #### wins over \boxed
  EXPECT_EQ(a.form, AnswerForm::kHashes);
  EXPECT_EQ(a.number, "4");

  a = extract_math_answer("#### 41\nwait, no.\n#### 42\n");  // the last ####
  EXPECT_EQ(a.number, "42");

  a = extract_math_answer("####\n\n  42\n");  // empty rest of line: the next non-empty line
  EXPECT_EQ(a.form, AnswerForm::kHashes);
  EXPECT_EQ(a.number, "42");

  a = extract_math_answer("#### The answer is 42.");
  EXPECT_EQ(a.number, "42");

  a = extract_math_answer("\\boxed{1} then \\boxed{2");  // the last balanced \boxed
  EXPECT_EQ(a.form, AnswerForm::kBoxed);
  EXPECT_EQ(a.number, "1");

  a = extract_math_answer("I think it is 12 or maybe 13.");
  EXPECT_EQ(a.form, AnswerForm::kLastNumber);
  EXPECT_EQ(a.number, "13");
  EXPECT_FALSE(a.marked());

  EXPECT_FALSE(extract_math_answer("I do not know.").found());
  EXPECT_FALSE(extract_math_answer("").found());
  EXPECT_FALSE(extract_math_answer("####").found());
}

// ---- the math scorer ----

TEST(MathScorer, MarkedCorrectAnswerIsOneAndWellFormed) {
  RewardResult r = math("Natalia sold 72 clips.\n#### 72", "She sold 48 + 24 = 72 clips.\n#### 72");
  EXPECT_EQ(r.total, 1.0);
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(component(r, "correct"), 1.0);
  EXPECT_EQ(component(r, "well_formed"), 1.0);
  EXPECT_EQ(component(r, "terminated"), 1.0);
  EXPECT_EQ(component(r, "answer_found"), 1.0);
  r = math("42", "The answer is \\boxed{42}.");
  EXPECT_EQ(r.total, 1.0);
  EXPECT_EQ(component(r, "well_formed"), 1.0);
}

TEST(MathScorer, NormalisesCommasCurrencyUnitsNegativesAndDecimals) {
  EXPECT_TRUE(math_correct("#### 1234", "#### 1,234"));
  EXPECT_TRUE(math_correct("1234", "#### $1,234.00"));
  EXPECT_TRUE(math_correct("#### 18", "#### $18"));
  EXPECT_TRUE(math_correct("#### 42", "#### 42 apples"));
  EXPECT_TRUE(math_correct("#### 42", "So she has 42 apples left."));
  EXPECT_TRUE(math_correct("#### -5", "#### -5"));
  EXPECT_TRUE(math_correct("-5", "The temperature falls to -5 degrees."));
  EXPECT_TRUE(math_correct("3.5", "#### 3.50"));
  EXPECT_TRUE(math_correct("#### 3.50", "\\boxed{3.5}"));
  EXPECT_TRUE(math_correct("7", "#### 7.0"));
  EXPECT_TRUE(math_correct("#### 42", "#### 42."));
  EXPECT_TRUE(math_correct("0.5", "#### 1/2"));
  EXPECT_TRUE(math_correct("\\boxed{\\frac{1}{2}}", "#### 0.5"));
  EXPECT_TRUE(math_correct("\\frac{1}{3}", "\\boxed{2/6}"));
  EXPECT_TRUE(math_correct("#### 123456789012345678901234567890", "#### 123,456,789,012,345,678,901,234,567,890"));
  // Text answers compare as text.
  EXPECT_TRUE(math_correct("#### Paris", "#### paris."));
  EXPECT_TRUE(math_correct("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\boxed{\\dfrac{\\sqrt{2}}{2}}"));
}

TEST(MathScorer, WrongAnswersAreNotCorrect) {
  RewardResult r = math("#### 42", "#### 41");
  EXPECT_FALSE(r.correct);
  EXPECT_DOUBLE_EQ(r.total, 0.1);  // marked but wrong: the format score
  EXPECT_EQ(component(r, "well_formed"), 1.0);
  EXPECT_DOUBLE_EQ(score_math("#### 42", "#### 41", true, 0.25).total, 0.25);
  EXPECT_FALSE(math_correct("5", "#### -5"));
  EXPECT_FALSE(math_correct("-5", "from 10-5"));  // a minus after a digit is not a sign
  EXPECT_FALSE(math_correct("3.5", "#### 3.05"));
  EXPECT_FALSE(math_correct("1234", "#### 1,23,4"));
  EXPECT_FALSE(math_correct("\\frac{1}{3}", "#### 0.33"));
  EXPECT_FALSE(math_correct("#### 42", "#### 42\n... no, #### 43"));
  EXPECT_FALSE(math_correct("#### 42", "#### 4 2"));
  EXPECT_FALSE(math_correct("#### Paris", "#### London"));
  EXPECT_FALSE(math_correct("#### 2\\sqrt{3}", "#### 3"));
  // The last-number fallback is never well-formed: a wrong one scores 0.
  r = math("#### 42", "maybe 41");
  EXPECT_EQ(r.total, 0.0);
  EXPECT_EQ(component(r, "well_formed"), 0.0);
  EXPECT_EQ(component(r, "answer_found"), 1.0);
}

TEST(MathScorer, LastNumberFallbackCanBeCorrectButIsNotWellFormed) {
  RewardResult r = math("#### 42", "6 * 7 = 42");
  EXPECT_EQ(r.total, 1.0);
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(component(r, "well_formed"), 0.0);
}

TEST(MathScorer, NoAnswerIsAFormatFailure) {
  for (const char* response : {"", "I do not know.", "####", "\\boxed{}", "the answer is forty-two"}) {
    RewardResult r = math("#### 42", response);
    EXPECT_EQ(r.total, 0.0) << response;
    EXPECT_FALSE(r.correct) << response;
    EXPECT_EQ(component(r, "well_formed"), 0.0) << response;
  }
  EXPECT_EQ(component(math("#### 42", "I do not know."), "answer_found"), 0.0);
}

TEST(MathScorer, UnterminatedIsZeroEvenWhenRight) {
  RewardResult r = math("#### 42", "#### 42", false);
  EXPECT_EQ(r.total, 0.0);
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(component(r, "terminated"), 0.0);
  EXPECT_EQ(math("#### 42", "#### 41", false).total, 0.0);
}

TEST(MathScorer, ReferencesMustHaveAnExtractableAnswer) {
  EXPECT_EQ(math_reference_mismatch("#### 28"), "");
  EXPECT_EQ(math_reference_mismatch("28"), "");
  EXPECT_EQ(math_reference_mismatch("-0.5"), "");
  EXPECT_EQ(math_reference_mismatch("\\boxed{x+1}"), "");
  EXPECT_NE(math_reference_mismatch("The answer is 28"), "");
  EXPECT_NE(math_reference_mismatch("Paris"), "");
  EXPECT_NE(math_reference_mismatch("####"), "");
  EXPECT_THROW(score_math("The answer is 28", "#### 28", true, 0.1), Error);
  ScorerSpec spec;
  spec.kind = parse_scorer_kind("math", "task.scorer");
  EXPECT_EQ(spec.kind, ScorerKind::kMath);
  EXPECT_STREQ(scorer_kind_name(spec.kind), "math");
  EXPECT_TRUE(contains(answer_mismatch(spec, "Paris"), "math"));
  EXPECT_EQ(score_answer(spec, "#### 28", "#### 28", true).total, 1.0);
}

// ---- the generated words task ----

WordProblemTask words_task(ScorerSpec spec = {}) { return WordProblemTask(20240917, spec); }

// The answer recomputed from the problem's numbers, independently of the generator's arithmetic.
int64_t expected_answer(const Problem& p) {
  const std::string t = p.meta["template"].get<std::string>();
  std::vector<int64_t> n = p.meta["numbers"].get<std::vector<int64_t>>();
  if (t == "shopping") {
    int64_t total = n[0] * n[1] + n[2] * n[3];
    for (int64_t bill : {20, 50, 100, 200, 500})
      if (bill > total) return bill - total;
    return -1;
  }
  if (t == "sharing") return (n[0] + n[1] * n[2]) % n[3] == 0 ? (n[0] + n[1] * n[2]) / n[3] : -1;
  if (t == "rate") return n[0] * (n[1] + n[2]);
  if (t == "ages") return n[0] * n[1] - n[2] + n[3];
  if (t == "remaining") return n[1] % n[0] == 0 ? n[1] - n[1] / n[0] - n[2] : -1;
  if (t == "savings") return n[0] * n[1] - n[2];
  if (t == "boxes") return (n[0] * n[1] - n[2]) % n[3] == 0 ? (n[0] * n[1] - n[2]) / n[3] : -1;
  if (t == "reading") return n[4] - n[0] * n[1] - n[2] * n[3];
  ADD_FAILURE() << "unknown template " << t;
  return -1;
}

// Every "a op b = c" in a worked solution is right.
void expect_equations_hold(const std::string& solution) {
  static const std::regex equation(R"((\d+) ([-+*/]) (\d+) = (\d+))");
  int count = 0;
  for (auto it = std::sregex_iterator(solution.begin(), solution.end(), equation); it != std::sregex_iterator(); ++it) {
    int64_t a = std::stoll((*it)[1]), b = std::stoll((*it)[3]), c = std::stoll((*it)[4]);
    char op = (*it)[2].str()[0];
    int64_t v = op == '+' ? a + b : op == '-' ? a - b : op == '*' ? a * b : (b != 0 && a % b == 0 ? a / b : -1);
    EXPECT_EQ(v, c) << it->str() << " in: " << solution;
    ++count;
  }
  EXPECT_GE(count, 2) << solution;
}

TEST(WordsTask, ProblemsAreWellFormedAndTheirReferencesScoreCorrect) {
  const WordProblemTask task = words_task();
  PhiloxStream rng(7, 0);
  std::map<std::string, int> per_template;
  for (int i = 0; i < 2000; ++i) {
    Problem p = task.sample_train(rng);
    const std::string t = task.problem_class(p);
    ++per_template[t];
    int64_t answer = expected_answer(p);
    EXPECT_GE(answer, 0) << p.prompt;
    EXPECT_TRUE(p.answer.ends_with("\n#### " + std::to_string(answer))) << p.answer;
    EXPECT_TRUE(p.prompt.ends_with(std::string("\n") + WordProblemTask::kInstruction + "\n")) << p.prompt;
    EXPECT_LE(static_cast<int64_t>(p.prompt.size()), WordProblemTask::kMaxPromptBytes);
    // References are short next to the generation limit (bytes bound BPE tokens from above).
    EXPECT_LE(static_cast<int64_t>(p.answer.size()), WordProblemTask::kMaxNewTokens) << p.answer;
    int64_t steps = p.meta["steps"].get<int64_t>();
    EXPECT_GE(steps, 2);
    EXPECT_LE(steps, 4);
    expect_equations_hold(p.answer);
    EXPECT_EQ(p.id, fnv1a64(p.prompt));

    RewardResult r = task.score(p, p.answer, true);
    ASSERT_EQ(r.total, 1.0) << p.prompt << p.answer;
    EXPECT_TRUE(r.correct);
    EXPECT_EQ(component(r, "well_formed"), 1.0);
    RewardResult wrong = task.score(p, "#### " + std::to_string(answer + 1), true);
    EXPECT_FALSE(wrong.correct);
    EXPECT_DOUBLE_EQ(wrong.total, 0.1);
    EXPECT_EQ(task.score(p, p.answer, false).total, 0.0);
  }
  EXPECT_EQ(per_template.size(), word_problem_templates().size());
  for (const std::string& t : word_problem_templates()) EXPECT_GT(per_template[t], 150) << t;
}

TEST(WordsTask, SameSeedSameProblemsOtherSeedOtherProblems) {
  const WordProblemTask task = words_task();
  PhiloxStream a(3, 0), b(3, 0), c(4, 0);
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    Problem pa = task.sample_train(a), pb = task.sample_train(b), pc = task.sample_train(c);
    EXPECT_EQ(pa.prompt, pb.prompt);
    EXPECT_EQ(pa.answer, pb.answer);
    EXPECT_EQ(pa.meta, pb.meta);
    differ += pa.prompt != pc.prompt;
  }
  EXPECT_GT(differ, 45);
  std::vector<Problem> e1 = task.eval_set(20), e2 = words_task().eval_set(20);
  ASSERT_EQ(e1.size(), e2.size());
  for (size_t i = 0; i < e1.size(); ++i) EXPECT_EQ(e1[i].prompt, e2[i].prompt);
  EXPECT_NE(WordProblemTask(1, ScorerSpec{}).eval_set(1).front().prompt, e1.front().prompt);
}

TEST(WordsTask, TrainAndTestAreDisjointAndAboutTenPercentIsHeldOut) {
  const WordProblemTask task = words_task();
  PhiloxStream rng(11, 0);
  int test = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) test += task.is_test(task.draw(rng));
  EXPECT_NEAR(static_cast<double>(test) / n, 0.1, 0.015);

  std::vector<Problem> eval = task.eval_set(500);
  ASSERT_EQ(eval.size(), 500u);
  std::set<uint64_t> eval_keys;
  for (const Problem& p : eval) {
    EXPECT_TRUE(task.is_test(p));
    EXPECT_TRUE(is_test_key(WordProblemTask::split_key(p)));
    EXPECT_TRUE(eval_keys.insert(WordProblemTask::split_key(p)).second) << "eval problems repeat: " << p.prompt;
    EXPECT_EQ(task.score(p, p.answer, true).total, 1.0) << p.answer;
  }
  PhiloxStream train(12, 0);
  for (int i = 0; i < 5000; ++i) {
    Problem p = task.sample_train(train);
    ASSERT_FALSE(task.is_test(p));
    ASSERT_EQ(eval_keys.count(WordProblemTask::split_key(p)), 0u);
  }
  // eval_set(m) is a prefix of eval_set(n).
  std::vector<Problem> head = task.eval_set(100);
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(head[i].prompt, eval[i].prompt);
}

TEST(WordsTask, TheSplitDependsOnTheNumbersNotTheNames) {
  const WordProblemTask task = words_task();
  Problem p = task.eval_set(1).front();
  Problem renamed = p;
  renamed.prompt = "Someone else entirely. " + p.prompt;
  EXPECT_EQ(WordProblemTask::split_key(renamed), WordProblemTask::split_key(p));
  EXPECT_TRUE(task.is_test(renamed));
  Problem other = p;
  other.meta["numbers"][0] = other.meta["numbers"][0].get<int64_t>() + 1000;
  EXPECT_NE(WordProblemTask::split_key(other), WordProblemTask::split_key(p));
}

TEST(WordsTask, RegistryBuildsItOnlyForTextTokenizers) {
  TaskConfig cfg = text_task("words");
  std::unique_ptr<Task> task = make_task(cfg);
  EXPECT_EQ(task->name(), "words");
  EXPECT_EQ(task->alphabet(), "");
  EXPECT_GE(task->max_new_tokens(), 128);
  EXPECT_LE(task->max_new_tokens(), 256);
  PhiloxStream rng = make_train_stream(cfg);
  Problem p = task->sample_train(rng);
  EXPECT_EQ(task->score(p, p.answer, true).total, 1.0);

  cfg.charset = kCharTokenizerCharset;  // the default: the character tokenizer
  std::string error = error_of(cfg);
  EXPECT_TRUE(contains(error, "task.charset")) << error;
  EXPECT_TRUE(contains(error, "'words'")) << error;
  EXPECT_TRUE(contains(error, "tokenizer.json")) << error;
  EXPECT_TRUE(contains(error_of(TaskConfig{.name = "words"}), "tokenizer.json"));

  cfg = text_task("words");
  cfg.scorer = "numeric";
  EXPECT_TRUE(contains(error_of(cfg), "task.scorer")) << error_of(cfg);
  cfg.scorer = "math";
  EXPECT_EQ(error_of(cfg), "");
  cfg.scorer = "exact";  // the math scorer without format credit
  std::unique_ptr<Task> exact = make_task(cfg);
  EXPECT_EQ(exact->score(p, "#### 100000", true).total, 0.0);
  EXPECT_EQ(exact->score(p, p.answer, true).total, 1.0);
}

TEST(WordsTask, CheckFitsBoundsThePromptByItsBytes) {
  const WordProblemTask task = words_task();
  EXPECT_NO_THROW(task.check_fits(32768, 256));
  EXPECT_NO_THROW(task.check_fits(1 + WordProblemTask::kMaxPromptBytes + 256, 256));
  EXPECT_THROW(task.check_fits(WordProblemTask::kMaxPromptBytes + 256, 256), Error);
  EXPECT_THROW(task.check_fits(64, 256), Error);
}

// ---- the shipped words JSONL ----

std::string data_path(const std::string& name) { return std::string(RLCPP_SOURCE_DIR) + "/configs/data/" + name; }

TaskConfig words_dataset() {
  TaskConfig cfg = text_task("dataset");
  cfg.path = data_path("words_train.jsonl");
  cfg.test_path = data_path("words_test.jsonl");
  cfg.scorer = "math";
  return cfg;
}

TEST(WordsDataset, ShippedFilesLoadAndEveryReferenceScoresCorrect) {
  for (const char* name : {"words_train.jsonl", "words_test.jsonl"})
    EXPECT_LT(std::filesystem::file_size(data_path(name)), 1u << 20) << name;
  TaskConfig cfg = words_dataset();
  std::unique_ptr<Task> task = make_task(cfg);
  auto* dataset = dynamic_cast<DatasetTask*>(task.get());
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(dataset->train_size(), 2000);
  EXPECT_EQ(dataset->test_size(), 200);

  ScorerSpec spec = make_scorer_spec(cfg);
  for (const std::string& path : {cfg.path, cfg.test_path}) {
    for (const Problem& p : load_jsonl_problems(path, "", spec)) {
      RewardResult r = task->score(p, p.answer, true);
      ASSERT_EQ(r.total, 1.0) << path << " line " << p.meta["line"] << ": " << p.answer;
      EXPECT_FALSE(task->score(p, "#### -1", true).correct);
    }
  }
  std::vector<Problem> eval = task->eval_set(1000);
  EXPECT_EQ(eval.size(), 200u);
  for (const Problem& p : eval) EXPECT_TRUE(task->is_test(p));

  cfg.charset = kCharTokenizerCharset;  // the character tokenizer cannot encode English
  std::string error = error_of(cfg);
  EXPECT_TRUE(contains(error, "words_train.jsonl' line 1")) << error;
  EXPECT_TRUE(contains(error, "tokenizer.json")) << error;
  cfg = words_dataset();
  cfg.scorer = "format";  // worked solutions are not integers
  EXPECT_TRUE(contains(error_of(cfg), "'math'")) << error_of(cfg);
}

// The files are what scripts/make_word_problems.py writes with its defaults, i.e. the words task's own problems:
// the first 2000 distinct training problems of task.seed 1 and eval_set(200) of the default eval seed.
TEST(WordsDataset, ShippedFilesMatchTheWordsTaskGenerator) {
  const WordProblemTask task = words_task();
  TaskConfig cfg;  // seed 1
  ScorerSpec spec;
  spec.kind = ScorerKind::kMath;
  std::vector<Problem> train = load_jsonl_problems(data_path("words_train.jsonl"), "", spec);
  std::vector<Problem> test = load_jsonl_problems(data_path("words_test.jsonl"), "", spec);
  ASSERT_EQ(train.size(), 2000u);
  ASSERT_EQ(test.size(), 200u);

  auto expect_same = [](const Problem& shipped, const Problem& made) {
    EXPECT_EQ(shipped.prompt, made.prompt);
    EXPECT_EQ(shipped.answer, made.answer);
    EXPECT_EQ(shipped.meta["template"], made.meta["template"]);
    EXPECT_EQ(shipped.meta["numbers"], made.meta["numbers"]);
    EXPECT_EQ(shipped.meta["steps"], made.meta["steps"]);
  };
  PhiloxStream rng = make_train_stream(cfg);
  std::set<uint64_t> seen;
  for (size_t i = 0; i < train.size();) {
    Problem made = task.sample_train(rng);
    if (!seen.insert(WordProblemTask::split_key(made)).second) continue;
    SCOPED_TRACE("words_train.jsonl line " + std::to_string(i + 1));
    expect_same(train[i], made);
    if (::testing::Test::HasFailure()) return;
    ++i;
  }
  std::vector<Problem> eval = task.eval_set(200);
  for (size_t i = 0; i < test.size(); ++i) {
    SCOPED_TRACE("words_test.jsonl line " + std::to_string(i + 1));
    expect_same(test[i], eval[i]);
    if (::testing::Test::HasFailure()) return;
  }
}

class MathDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("rlcpp_words_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text) {
    std::string path = (dir_ / "math.jsonl").string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(MathDatasetTest, TheDatasetTaskScoresWithTheMathScorerAndRejectsBadReferences) {
  ScorerSpec spec;
  spec.kind = ScorerKind::kMath;
  std::string path = write(
      R"({"prompt": "What is 6 times 7?", "answer": "6 * 7 = 42\n#### 42"})" "\n"
      R"({"prompt": "Half of 7?", "answer": "3.5"})" "\n"
      R"({"prompt": "Capital of France?", "answer": "#### Paris"})" "\n");
  std::vector<Problem> problems = load_jsonl_problems(path, "", spec);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(score_answer(spec, problems[0].answer, "It is 42.\n#### 42", true).total, 1.0);
  EXPECT_EQ(score_answer(spec, problems[1].answer, "\\boxed{7/2}", true).total, 1.0);
  EXPECT_EQ(score_answer(spec, problems[2].answer, "#### Paris", true).total, 1.0);
  EXPECT_FALSE(score_answer(spec, problems[2].answer, "#### Lyon", true).correct);

  path = write(R"({"prompt": "p", "answer": "42"})" "\n" R"({"prompt": "q", "answer": "no answer here"})" "\n");
  try {
    load_jsonl_problems(path, "", spec);
    ADD_FAILURE() << "a reference without an answer loaded";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "line 2")) << e.what();
    EXPECT_TRUE(contains(e.what(), "math")) << e.what();
  }
}

// ---- countdown in natural language ----

CountdownTask countdown_words(ScorerSpec spec = {}) { return CountdownTask(20240917, spec, CountdownStyle::kWords); }

TEST(CountdownWords, PromptIsEnglishAndTheReferenceIsTheExpressionAfterHashes) {
  const CountdownTask task = countdown_words();
  EXPECT_EQ(task.name(), "countdown_words");
  Problem p = task.make_problem({3, 7, 25, 50}, 82, "(50-25)*3+7");
  EXPECT_EQ(p.prompt,
            "Using the numbers 3, 7, 25 and 50, each exactly once, with + - * / and parentheses, make 82. Put the "
            "final expression after ####.\n");
  EXPECT_EQ(p.answer, "#### (50-25)*3+7");
  EXPECT_EQ(task.make_problem({63, 20, 70}, 13, "63-(70-20)").prompt.substr(0, 38),
            "Using the numbers 63, 20 and 70, each ");

  EXPECT_EQ(task.score(p, p.answer, true).total, 1.0);
  EXPECT_TRUE(task.score(p, "50-25 = 25, 25*3 = 75, 75+7 = 82.\n#### (50-25)*3+7", true).correct);
  EXPECT_TRUE(task.score(p, "#### (50-25)*3+7 = 82.", true).correct);
  EXPECT_TRUE(task.score(p, "#### 7 + 3 * (50 - 25)\n", true).correct);

  RewardResult wrong = task.score(p, "#### (50-25)*3-7", true);  // value 68
  EXPECT_FALSE(wrong.correct);
  EXPECT_DOUBLE_EQ(wrong.total, 0.1);
  EXPECT_EQ(component(wrong, "well_formed"), 1.0);
  RewardResult unused = task.score(p, "#### 50+25+7", true);  // 82 without the 3
  EXPECT_FALSE(unused.correct);
  EXPECT_EQ(component(unused, "uses_numbers"), 0.0);
  RewardResult bare = task.score(p, "(50-25)*3+7", true);  // no ####
  EXPECT_EQ(bare.total, 0.0);
  EXPECT_EQ(component(bare, "well_formed"), 0.0);
  EXPECT_EQ(task.score(p, "#### eighty-two", true).total, 0.0);
  EXPECT_EQ(task.score(p, p.answer, false).total, 0.0);
  EXPECT_EQ(countdown_words(ScorerSpec{.kind = ScorerKind::kExact}).score(p, "#### (50-25)*3-7", true).total, 0.0);
}

TEST(CountdownWords, DrawsTheSamePuzzlesAsCountdownAndItsReferencesScoreCorrect) {
  const CountdownTask words = countdown_words();
  const CountdownTask compact(20240917, ScorerSpec{});
  PhiloxStream a(5, 0), b(5, 0);
  for (int i = 0; i < 300; ++i) {
    Problem w = words.sample_train(a), c = compact.sample_train(b);
    EXPECT_EQ(w.meta, c.meta);
    EXPECT_EQ(w.answer, "#### " + c.answer);
    ASSERT_EQ(words.score(w, w.answer, true).total, 1.0) << w.prompt << w.answer;
    EXPECT_FALSE(words.score(w, "#### " + c.answer + "+1", true).correct);
  }
  std::vector<Problem> we = words.eval_set(50), ce = compact.eval_set(50);
  for (size_t i = 0; i < we.size(); ++i) {
    EXPECT_EQ(we[i].meta, ce[i].meta);
    EXPECT_TRUE(words.is_test(we[i]));
  }
}

TEST(CountdownWords, RegistryBuildsItOnlyForTextTokenizers) {
  TaskConfig cfg = text_task("countdown_words");
  std::unique_ptr<Task> task = make_task(cfg);
  EXPECT_EQ(task->name(), "countdown_words");
  EXPECT_EQ(task->alphabet(), "");
  EXPECT_GT(task->max_new_tokens(), 24);
  cfg.charset = kCharTokenizerCharset;
  EXPECT_TRUE(contains(error_of(cfg), "tokenizer.json")) << error_of(cfg);
  cfg = text_task("countdown_words");
  cfg.scorer = "math";
  EXPECT_TRUE(contains(error_of(cfg), "task.scorer")) << error_of(cfg);
  // The compact countdown still runs under the character tokenizer.
  EXPECT_EQ(error_of(TaskConfig{.name = "countdown"}), "");
}

}  // namespace
}  // namespace rlcpp
