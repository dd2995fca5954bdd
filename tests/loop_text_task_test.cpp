// Text tasks end to end on a Qwen-vocabulary model: a checkpoint carrying the Qwen3 tokenizer.json of
// tests/data/qwen3 (and its chat template) trains the words task with GRPO for two steps, its prompts rendered
// as ChatML turns; every checkpoint it writes carries the tokenizer, which later commands pick up by themselves.
// And the chat formatting of prompts: one user turn, an optional system message, a dataset's conversation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "loop/controller.h"
#include "loop/evaluation.h"
#include "model/checkpoint.h"
#include "tokenizer/hf_tokenizer.h"
#include "model/init.h"
#include "tests/error_test_support.h"
#include "tests/train_test_support.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

const std::string kQwen3 = qwen3_fixture_dir();

// The Qwen3 tokenizer's vocabulary and EOS (<|im_end|>) on a small body, a context long enough for word problems.
ModelConfig qwen_vocab_config() { return model_preset("qwen-tiny"); }

TEST(ChatPrompts, PromptsBecomeChatTurnsOfTheTemplate) {
  ASSERT_TRUE(fs::exists(kQwen3 + "/tokenizer.json")) << kQwen3 << " is missing";
  const ModelConfig mc = qwen_vocab_config();
  const HfTokenizer plain(kQwen3, mc);
  EXPECT_FALSE(plain.bos_id().has_value());  // Qwen puts nothing before a prompt
  EXPECT_EQ(plain.encode_prompt("2+2=", Json()), plain.encode("2+2="));
  ChatOptions chat;
  chat.enabled = true;
  chat.system = "Answer briefly.";
  const HfTokenizer chatty(kQwen3, mc, chat);
  EXPECT_EQ(chatty.encode_prompt("What is 2+2?", Json()),
            chatty.encode("<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                          "<|im_start|>assistant\n"));
  // A conversation goes through the template even without chat.enabled; a system message of its own wins.
  const Json conversation = Json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "q"},
      {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}])");
  EXPECT_EQ(plain.encode_prompt("", conversation),
            plain.encode("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na"
                         "<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n"));
  expect_error([&] { plain.encode_prompt("", Json::parse(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "a"}])")); }, {"must end with a user or tool message"});
  chat.enable_thinking = false;
  chat.system.clear();
  EXPECT_EQ(HfTokenizer(kQwen3, mc, chat).encode_prompt("hi", Json()),
            plain.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  // No chat formatting without a tokenizer.json and its template.
  expect_error([&] { load_tokenizer("", mc, chat); }, {"the character tokenizer has none"});
  expect_error([&] { CharTokenizer().encode_prompt("", conversation); }, {"needs a tokenizer.json with a chat template"});
  const fs::path bare = fs::temp_directory_path() / "rlcpp_chat_bare";
  fs::create_directories(bare);
  fs::copy_file(kQwen3 + "/tokenizer.json", bare / "tokenizer.json", fs::copy_options::overwrite_existing);
  expect_error([&] { HfTokenizer(bare.string(), mc, chat); }, {"needs a \"chat_template\"", "there is none"});
  fs::remove_all(bare);
  // The model's vocabulary must hold the tokenizer's ids.
  ModelConfig small = mc;
  small.vocab_size = 1000;
  expect_error([&] { HfTokenizer(kQwen3, small, {}); }, {"past the model's vocabulary of 1000"});
}

// What c.validate() throws when run from the repository root (a shipped config names its tokenizer relative to
// it); "" when it passes.
std::string validation_error_at_repository_root(const TrainConfig& c) {
  const fs::path here = fs::current_path();
  fs::current_path(RLCPP_SOURCE_DIR);
  std::string error;
  try {
    c.validate();
  } catch (const Error& e) {
    error = e.what();
  }
  fs::current_path(here);
  return error;
}

// The shipped qwen-tiny recipe (README "Real models") loads and validates from the repository root: its
// tokenizer fits the preset's vocabulary, its chat template renders, the words task fits the context.
TEST(TextTask, TheShippedQwenTinyRecipeValidates) {
  TrainConfig c;
  config_from_json(load_json_file(std::string(RLCPP_SOURCE_DIR) + "/configs/grpo_words_qwen_tiny.json"), c);
  EXPECT_EQ(c.warm_start.sft.model_preset, "qwen-tiny");
  EXPECT_EQ(c.task.name, "words");
  EXPECT_TRUE(c.chat.enabled);
  EXPECT_EQ(validation_error_at_repository_root(c), "");
}

// The shipped 0.5B LoRA recipe (README "Real models") validates: rank-16 adapters on every Linear layer of the
// Qwen2.5-0.5B shape, bf16 trainer and rollout.
TEST(TextTask, TheShippedQwen05bLoraRecipeValidates) {
  TrainConfig c;
  config_from_json(load_json_file(std::string(RLCPP_SOURCE_DIR) + "/configs/grpo_words_qwen05b_lora.json"), c);
  EXPECT_EQ(c.model_preset, "qwen05b");
  EXPECT_EQ(c.trainer.lora.rank, 16);
  EXPECT_EQ(c.trainer.lora.resolved_targets(), lora_target_names());
  EXPECT_EQ(c.trainer.dtype, "bf16");
  EXPECT_EQ(c.trainer.lora.base_dtype, "bf16");  // the laptop's 6 GB: bench/RESULTS.md "The 0.5B LoRA run in 6 GB"
  EXPECT_EQ(validation_error_at_repository_root(c), "");
}

// A tokenizer that cannot be used is found before any work, naming the config key, and leaves no run directory.
TEST(TextTask, ABadTokenizerKeyIsAnErrorBeforeAnyWork) {
  TrainConfig c;
  c.tokenizer = "/nonexistent/tokenizer.json";
  expect_error([&] { c.validate(); }, {"config key 'tokenizer' (/nonexistent/tokenizer.json)", "cannot read a tokenizer.json: No such file"});
  c.tokenizer = kQwen3;  // fine as a tokenizer, but its ids do not fit the tiny preset's 32
  expect_error([&] { c.validate(); }, {"config key 'tokenizer'", "past the model's vocabulary of 32"});
  SftConfig s;
  s.run_dir = (fs::temp_directory_path() / "rlcpp_bad_tokenizer_sft").string();
  fs::remove_all(s.run_dir);
  s.tokenizer = kQwen3;
  expect_error([&] { run_sft(s, config_to_json(s)); }, {"config key 'tokenizer'", "past the model's vocabulary"});
  EXPECT_FALSE(fs::exists(s.run_dir));
}

TEST(TextTask, WordsTrainsOnAQwenVocabularyModelWithChatPromptsAndItsCheckpointsCarryTheTokenizer) {
  ASSERT_TRUE(fs::exists(kQwen3 + "/tokenizer.json")) << kQwen3 << " is missing";
  const fs::path root = fs::temp_directory_path() / "rlcpp_text_task_test";
  fs::remove_all(root);
  const ParameterStore init = init_random(qwen_vocab_config(), 3);
  save_model_checkpoint((root / "init").string(), init, false,
                        {kQwen3 + "/tokenizer.json", kQwen3 + "/tokenizer_config.json"});
  TrainConfig c;
  c.run_dir = (root / "run").string();
  c.init_checkpoint = (root / "init").string();  // its tokenizer.json is used by itself
  c.task.name = "words";
  c.chat.enabled = true;
  c.rollout.placement = "colocated";
  c.rollout.prompts_per_step = 2;
  c.rollout.group_size = 2;
  c.rollout.sampling.max_new_tokens = 8;
  c.rollout.sampling.temperature = 1.0f;
  c.ppo.mini_batch_size = 4;
  c.ppo.micro_batch_size = 2;  // two micro-batches per update
  c.steps = 2;
  c.eval_every = 0;
  c.eval_size = 2;
  c.samples_per_step = 4;
  const TrainSummary s = run_train(c, config_to_json(c));
  const std::vector<Json> metrics = read_jsonl(fs::path(s.run_dir) / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  const std::vector<Json> samples = read_jsonl(fs::path(s.run_dir) / "samples.jsonl");
  ASSERT_FALSE(samples.empty());
  for (const Json& line : samples) {
    EXPECT_NE(line["prompt"].get<std::string>().find("####"), std::string::npos) << line.dump();
    EXPECT_TRUE(line["response"].is_string());
  }
  // The final checkpoint carries the tokenizer; loading it picks the tokenizer up without being told.
  ASSERT_FALSE(s.checkpoint.empty());
  EXPECT_TRUE(fs::exists(fs::path(s.checkpoint) / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(fs::path(s.checkpoint) / "tokenizer_config.json"));
  EXPECT_EQ(choose_tokenizer("", s.checkpoint), s.checkpoint);
  const ParameterStore trained = load_model_checkpoint(s.checkpoint);
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(choose_tokenizer("", s.checkpoint), trained.config(), c.chat);
  EXPECT_EQ(tok->charset(), "");
  // The rollout's prompt is the ChatML rendering of the problem's text.
  TaskConfig tc;
  tc.name = "words";
  const std::unique_ptr<Task> task = make_task_for(tc, *tok);
  const Problem p = task->eval_set(1)[0];
  const std::vector<int32_t> ids = encode_prompt(*tok, p);
  EXPECT_EQ(ids, dynamic_cast<const HfTokenizer&>(*tok).bpe().encode("<|im_start|>user\n" + p.prompt +
                                                                     "<|im_end|>\n<|im_start|>assistant\n"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace rlcpp
