// The JSONL dataset task: every line validated with its line number, characters outside the tokenizer's
// charset named, and a split that is disjoint and reproducible.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "reward/dataset_task.h"
#include "reward/split_hash.h"
#include "reward/task_config.h"
#include "reward/task_registry.h"

namespace rlcpp {
namespace {

class DatasetTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("rlcpp_dataset_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // 300 addition problems "a+b=" with answers.
  std::string write_additions(const std::string& name, int first, int count) {
    std::string text;
    for (int i = first; i < first + count; ++i) {
      int a = i * 7 % 1000, b = i * 13 % 1000;
      text += R"({"prompt": ")" + std::to_string(a) + "+" + std::to_string(b) + R"(=", "answer": ")" +
              std::to_string(a + b) + "\"}\n";
    }
    return write(name, text);
  }

  std::string error_of(const std::string& text, ScorerSpec scorer = {},
                       const std::string& charset = kCharTokenizerCharset) {
    std::string path = write("bad.jsonl", text);
    try {
      load_jsonl_problems(path, charset, scorer);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_F(DatasetTaskTest, HashSplitIsDisjointReproducibleAndAboutTenPercent) {
  std::string path = write_additions("add.jsonl", 0, 1000);
  DatasetTask task(path, "", kCharTokenizerCharset, 1, ScorerSpec{});
  EXPECT_EQ(task.train_size() + task.test_size(), 1000);
  EXPECT_NEAR(task.test_size() / 1000.0, 0.1, 0.03);
  std::vector<Problem> eval = task.eval_set(10000);
  ASSERT_EQ(static_cast<int64_t>(eval.size()), task.test_size());
  std::set<std::string> test_prompts;
  for (const Problem& p : eval) {
    EXPECT_TRUE(task.is_test(p));
    EXPECT_TRUE(is_test_key(fnv1a64(p.prompt)));
    test_prompts.insert(p.prompt);
  }
  PhiloxStream rng(3, 0);
  for (int i = 0; i < 2000; ++i) {
    Problem p = task.sample_train(rng);
    ASSERT_FALSE(task.is_test(p));
    ASSERT_EQ(test_prompts.count(p.prompt), 0u);
  }
  DatasetTask again(path, "", kCharTokenizerCharset, 1, ScorerSpec{});
  std::vector<Problem> head = again.eval_set(20);
  ASSERT_EQ(head.size(), 20u);
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(head[i].prompt, eval[i].prompt);
  DatasetTask reseeded(path, "", kCharTokenizerCharset, 2, ScorerSpec{});
  EXPECT_NE(reseeded.eval_set(20)[0].prompt + reseeded.eval_set(20)[1].prompt, head[0].prompt + head[1].prompt);
  EXPECT_EQ(task.score(eval[0], eval[0].answer, true).total, 1.0);
  EXPECT_EQ(task.max_new_tokens(), 6);
}

TEST_F(DatasetTaskTest, SeparateTestFileIsTheHeldOutSet) {
  std::string train = write_additions("train.jsonl", 0, 100);
  std::string test = write_additions("test.jsonl", 100, 30);
  DatasetTask task(train, test, kCharTokenizerCharset, 1, ScorerSpec{});
  EXPECT_EQ(task.train_size(), 100);
  EXPECT_EQ(task.test_size(), 30);
  for (const Problem& p : task.eval_set(100)) EXPECT_TRUE(task.is_test(p));
  PhiloxStream rng(1, 0);
  for (int i = 0; i < 200; ++i) EXPECT_FALSE(task.is_test(task.sample_train(rng)));
}

TEST_F(DatasetTaskTest, PromptLongerThanTheContextIsFoundAtTheStartNamingFileAndLine) {
  std::string train = write_additions("train.jsonl", 0, 100);
  std::string test = write("test.jsonl", "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n"
                                         "{\"prompt\": \"" + std::string(120, '1') + "+1=\", \"answer\": \"2\"}\n");
  DatasetTask task(train, test, kCharTokenizerCharset, 1, ScorerSpec{});
  EXPECT_NO_THROW(task.check_fits(256, 8));
  try {
    task.check_fits(128, 8);  // 1 + 123 + 8 = 132 positions
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(contains(m, "test.jsonl' line 2")) << m;
    EXPECT_TRUE(contains(m, "need 132 positions")) << m;
    EXPECT_TRUE(contains(m, "context of 128")) << m;
  }
}

TEST_F(DatasetTaskTest, PromptInBothFilesIsAnError) {
  std::string train = write_additions("train.jsonl", 0, 100);
  std::string test = write_additions("test.jsonl", 95, 10);  // lines 1-5 repeat train lines 96-100
  try {
    DatasetTask(train, test, kCharTokenizerCharset, 1, ScorerSpec{});
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(contains(m, "test.jsonl' line 1")) << m;
    EXPECT_TRUE(contains(m, "train.jsonl' line 96")) << m;
  }
}

TEST_F(DatasetTaskTest, EveryLineIsValidatedWithItsLineNumber) {
  const std::string ok = R"({"prompt": "1+1=", "answer": "2"})";
  EXPECT_EQ(error_of(ok + "\n" + ok + "\n"), "");
  std::string m = error_of(ok + "\n" + ok + "\n{\"prompt\": \"1+2=\", \"answer\": \n");
  EXPECT_TRUE(contains(m, "line 3") && contains(m, "not valid JSON")) << m;
  m = error_of(ok + "\n{\"prompt\": \"1+2=\", \"answer\": \"3\", \"meta\": {\"x\": 1e400}}\n");
  EXPECT_TRUE(contains(m, "line 2") && contains(m, "not valid JSON")) << m;
  m = error_of(ok + "\n{\"prompt\": \"1+2=\"}\n");
  EXPECT_TRUE(contains(m, "line 2") && contains(m, "\"answer\" must be a string")) << m;
  m = error_of("{\"prompt\": \"1+2=\", \"answer\": 3}\n");
  EXPECT_TRUE(contains(m, "line 1") && contains(m, "\"answer\" must be a string")) << m;
  m = error_of("{\"prompt\": \"1+2=\", \"answer\": \"3\", \"solution\": \"3\"}\n");
  EXPECT_TRUE(contains(m, "unknown key 'solution'")) << m;
  m = error_of("[\"1+2=\", \"3\"]\n");
  EXPECT_TRUE(contains(m, "expected an object")) << m;
  m = error_of("{\"prompt\": \"\", \"answer\": \"3\"}\n");
  EXPECT_TRUE(contains(m, "\"prompt\" is empty")) << m;
  m = error_of("{\"prompt\": \"1+2=\", \"answer\": \"3\", \"meta\": 4}\n");
  EXPECT_TRUE(contains(m, "\"meta\" must be an object")) << m;
  // Blank lines are skipped but still counted.
  m = error_of(ok + "\n\n   \n{\"prompt\": 5, \"answer\": \"3\"}\n");
  EXPECT_TRUE(contains(m, "line 4")) << m;
}

// A line may give a conversation instead of a prompt: the chat template renders it when it is encoded. Its
// JSON is its identity (split, duplicates); the last user turn is its prompt text.
TEST_F(DatasetTaskTest, ConversationLinesLoadWithTheirMessagesAndAreValidated) {
  const std::string one = R"({"messages": [{"role": "system", "content": "Be exact."},
      {"role": "user", "content": "What is 2+3?"}], "answer": "5", "meta": {"k": 1}})";
  std::string joined = one;
  joined.erase(std::remove(joined.begin(), joined.end(), '\n'), joined.end());
  const std::vector<Problem> problems = load_jsonl_problems(write("chat.jsonl", joined + "\n"), "", ScorerSpec{});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].prompt, "What is 2+3?");
  EXPECT_EQ(problems[0].meta["messages"].size(), 2u);
  EXPECT_EQ(problems[0].meta["k"], 1);
  const auto error = [&](const std::string& line) { return error_of(line + "\n", ScorerSpec{}, ""); };
  std::string m = error(R"({"prompt": "x", "messages": [{"role": "user", "content": "x"}], "answer": "1"})");
  EXPECT_TRUE(contains(m, "line 1") && contains(m, "give one of \"prompt\" (text) and \"messages\"")) << m;
  m = error(R"({"messages": [], "answer": "1"})");
  EXPECT_TRUE(contains(m, "\"messages\" must be a non-empty list")) << m;
  m = error(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "answer": "1"})");
  EXPECT_TRUE(contains(m, "the last message must be the user's")) << m;
  m = error(R"({"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "s"}, {"role": "user", "content": "q"}], "answer": "1"})");
  EXPECT_TRUE(contains(m, "message 1: role \"system\" (system first")) << m;
  m = error(R"({"messages": [{"role": "user", "content": 5}], "answer": "1"})");
  EXPECT_TRUE(contains(m, "message 0 must be {\"role\": string, \"content\": string}")) << m;
  m = error_of(R"({"messages": [{"role": "user", "content": "abc"}], "answer": "1"})" "\n");
  EXPECT_TRUE(contains(m, "message 0: content has character 'a'")) << m;
}

// A "meta" nested 10^6 deep used to parse and then overflow the stack when the problem copied it.
TEST_F(DatasetTaskTest, DeeplyNestedMetaIsAnErrorNamingTheLineAndTheDepthLimit) {
  const int64_t depth = 1000000;
  std::string meta;
  for (int64_t i = 0; i < depth; ++i) meta += R"({"a":)";
  meta += "1" + std::string(depth, '}');
  const std::string ok = R"({"prompt": "1+1=", "answer": "2"})";
  const std::string m = error_of(ok + "\n" + R"({"prompt": "1+2=", "answer": "3", "meta": )" + meta + "}\n");
  EXPECT_TRUE(contains(m, "line 2") && contains(m, "not valid JSON")) << m;
  EXPECT_TRUE(contains(m, "nesting deeper than the limit of 128 levels")) << m;
}

TEST_F(DatasetTaskTest, CharacterTheTokenizerCannotEncodeIsNamed) {
  std::string m = error_of(R"({"prompt": "1+1=", "answer": "2"})" "\n" R"({"prompt": "1+é=", "answer": "2"})" "\n");
  EXPECT_TRUE(contains(m, "line 2")) << m;
  EXPECT_TRUE(contains(m, "prompt")) << m;
  EXPECT_TRUE(contains(m, "'é' (U+00E9)")) << m;
  EXPECT_TRUE(contains(m, "offset 2")) << m;
  m = error_of(R"({"prompt": "1+1=", "answer": "2x"})" "\n");
  EXPECT_TRUE(contains(m, "answer") && contains(m, "'x' (U+0078)")) << m;
  m = error_of(R"({"prompt": "1\t+1=", "answer": "2"})" "\n");
  EXPECT_TRUE(contains(m, "'\\t' (U+0009)")) << m;
  // Without a charset any text is accepted.
  EXPECT_EQ(error_of(R"({"prompt": "1+é=", "answer": "2"})" "\n", ScorerSpec{}, ""), "");
}

TEST_F(DatasetTaskTest, AnswersMustSuitTheScorer) {
  std::string m = error_of(R"({"prompt": "hello", "answer": "world"})" "\n", ScorerSpec{}, "");
  EXPECT_TRUE(contains(m, "line 1") && contains(m, "'exact'")) << m;
  m = error_of(R"({"prompt": "1+1=", "answer": "02"})" "\n");
  EXPECT_TRUE(contains(m, "canonical integer")) << m;
  ScorerSpec exact;
  exact.kind = ScorerKind::kExact;
  EXPECT_EQ(error_of(R"({"prompt": "hello", "answer": "world"})" "\n", exact, ""), "");
  ScorerSpec numeric;
  numeric.kind = ScorerKind::kNumeric;
  EXPECT_EQ(error_of(R"({"prompt": "1/4=", "answer": "0.25"})" "\n", numeric, ""), "");
  m = error_of(R"({"prompt": "1/4=", "answer": "1/4"})" "\n", numeric, "");
  EXPECT_TRUE(contains(m, "decimal number")) << m;
}

TEST_F(DatasetTaskTest, ConflictingAnswersForOnePromptAreAnError) {
  std::string m = error_of(R"({"prompt": "1+1=", "answer": "2"})" "\n" R"({"prompt": "2+2=", "answer": "4"})" "\n"
                           R"({"prompt": "1+1=", "answer": "3"})" "\n");
  EXPECT_TRUE(contains(m, "line 3") && contains(m, "line 1")) << m;
  EXPECT_EQ(error_of(R"({"prompt": "1+1=", "answer": "2"})" "\n" R"({"prompt": "1+1=", "answer": "2"})" "\n"), "");
}

TEST_F(DatasetTaskTest, NegativeIntegersAreWellFormedAndMetaIsKept) {
  std::string path = write("neg.jsonl", R"({"prompt": "3-10=", "answer": "-7", "meta": {"source": "x"}})" "\n");
  std::vector<Problem> problems = load_jsonl_problems(path, kCharTokenizerCharset, ScorerSpec{});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].meta["source"], "x");
  EXPECT_EQ(problems[0].meta["line"], 1);
  EXPECT_EQ(problems[0].id, fnv1a64("3-10="));
}

TEST_F(DatasetTaskTest, EmptyMissingOrOneSidedFilesAreErrors) {
  std::string m;
  try {
    DatasetTask(write("empty.jsonl", ""), "", kCharTokenizerCharset, 1, ScorerSpec{});
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_TRUE(contains(m, "no training problems")) << m;
  m = "";
  try {
    DatasetTask((dir_ / "missing.jsonl").string(), "", kCharTokenizerCharset, 1, ScorerSpec{});
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_TRUE(contains(m, "missing.jsonl: cannot read a JSONL dataset file: No such file or directory")) << m;
  m = "";
  try {
    DatasetTask(write_additions("two.jsonl", 0, 2), "", kCharTokenizerCharset, 1, ScorerSpec{});
  } catch (const Error& e) {
    m = e.what();
  }
  // "0+0=" and "7+13=" both hash to train (checked in Python), so the hash split holds nothing out.
  EXPECT_TRUE(contains(m, "test_path")) << m;
}

TEST_F(DatasetTaskTest, RegistryBuildsItFromConfig) {
  TaskConfig cfg;
  cfg.name = "dataset";
  cfg.path = write_additions("add.jsonl", 0, 200);
  std::unique_ptr<Task> task = make_task(cfg);
  EXPECT_EQ(task->name(), "dataset");
  PhiloxStream rng = make_train_stream(cfg);
  Problem p = task->sample_train(rng);
  EXPECT_EQ(task->score(p, p.answer, true).total, 1.0);
  EXPECT_DOUBLE_EQ(task->score(p, "1", true).total, p.answer == "1" ? 1.0 : 0.1);
}

}  // namespace
}  // namespace rlcpp
