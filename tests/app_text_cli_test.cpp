// generate and eval through the CLI on a qwen-tiny checkpoint that carries a tokenizer.json (the Qwen3 one of
// tests/data/qwen3): prompts are text or chat turns (--chat, {"messages": ...} lines), --show-prompt prints them
// rendered, responses come back as text, and the words task evaluates; without --chat support in the tokenizer the
// error says why. export writes a bf16 copy with the tokenizer beside it.
#include <gtest/gtest.h>

#include <cstring>

#include "core/config.h"
#include "model/lora.h"
#include "tests/app_test_support.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

const std::string kQwen3 = qwen3_fixture_dir();

class TextCli : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    qwen_ = (dir_ / "qwen").string();
    save_model_checkpoint(qwen_, init_random(model_preset("qwen-tiny"), 2), false,
                          {kQwen3 + "/tokenizer.json", kQwen3 + "/tokenizer_config.json"});
  }
  std::string qwen_;
};

TEST_F(TextCli, GenerateAndEvalUseTheCheckpointsTokenizer) {
  ASSERT_TRUE(std::filesystem::exists(kQwen3 + "/tokenizer.json")) << kQwen3 << " is missing";
  const std::string out = (dir_ / "samples.jsonl").string();
  const std::string prompts = write("prompts.jsonl",
                                    "{\"prompt\": \"Hello, 世界\"}\n"
                                    "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}], \"id\": 9}\n");
  CliResult r = run_cli("generate " + qwen_ + " --prompts " + prompts + " --chat --system 'Be brief.' --max-new-tokens 3 "
                        "--temperature 1 --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out);
  std::string line;
  int lines = 0;
  for (; std::getline(in, line); ++lines) {
    const Json j = Json::parse(line);
    EXPECT_TRUE(j["response"].is_string()) << line;
    EXPECT_EQ(j["tokens"].size(), 3u) << line;
  }
  EXPECT_EQ(lines, 2);
  r = run_cli("eval " + qwen_ + " --task words --n 3 --max-new-tokens 4 --chat");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("task words: 3 problems"), std::string::npos) << r.output;
  // The character-tokenizer checkpoint has no chat template, and the words task needs text.
  const std::string ckpt = (dir_ / "ckpt").string();
  r = run_cli("generate " + ckpt + " --prompt 1+2= --chat");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("the character tokenizer has none"), std::string::npos) << r.output;
  r = run_cli("eval " + ckpt + " --task words --n 3");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("tokenizer.json"), std::string::npos) << r.output;
}

// --show-prompt prints each prompt as the model sees it: the chat template rendered, special tokens written out.
TEST_F(TextCli, GenerateShowPromptPrintsTheRenderedChatTemplate) {
  ASSERT_TRUE(std::filesystem::exists(kQwen3 + "/tokenizer.json")) << kQwen3 << " is missing";
  CliResult r = run_cli("generate " + qwen_ + " --prompt 'What is 2+2?' --chat --system 'Be brief.' --show-prompt "
                        "--max-new-tokens 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string rendered = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                               "<|im_start|>assistant\n";
  EXPECT_NE(r.output.find("prompt 0 (23 tokens):\n" + rendered + "\n"), std::string::npos) << r.output;
  r = run_cli("generate " + qwen_ + " --prompt 'What is 2+2?' --max-new-tokens 2");  // not asked: not shown
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("<|im_start|>"), std::string::npos) << r.output;
  // The character tokenizer writes its BOS out.
  r = run_cli("generate " + (dir_ / "ckpt").string() + " --prompt 1+2= --show-prompt --max-new-tokens 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("prompt 0 (5 tokens):\n<bos>1+2=\n"), std::string::npos) << r.output;
}

// export writes a bf16 Hugging Face directory with the tokenizer beside it, which the other commands open.
TEST_F(TextCli, ExportWritesABf16DirectoryWithItsTokenizer) {
  ASSERT_TRUE(std::filesystem::exists(kQwen3 + "/tokenizer.json")) << kQwen3 << " is missing";
  const std::string out = (dir_ / "qwen_bf16").string();
  CliResult r = run_cli("export " + qwen_ + " " + out + " --dtype bf16");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer_config.json"));
  EXPECT_EQ(Json::parse(std::ifstream(out + "/config.json"))["torch_dtype"], "bfloat16");
  EXPECT_LT(std::filesystem::file_size(out + "/model.safetensors"),
            std::filesystem::file_size(qwen_ + "/model.safetensors") / 2 + 4096);
  r = run_cli("generate " + out + " --prompt Hi --max-new-tokens 2");
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_cli("export " + qwen_ + " " + out);  // never over an existing directory
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("already exists"), std::string::npos) << r.output;
}

// export --merge-lora folds a PEFT adapter into the weights: the written model is the checkpoint's with W + s·B·A on
// the targeted layers, bit for bit (fp32); an adapter made for another model is refused naming the tensor.
TEST_F(TextCli, ExportMergesALoraAdapter) {
  const ParameterStore base = load_model_checkpoint(qwen_);
  LoraConfig lc;
  lc.rank = 4;
  lc.targets = {"q_proj", "down_proj"};
  LoraAdapters adapters(base.config(), lc);
  adapters.init(3);
  float* w = adapters.weights().flat().data<float>();
  for (const LoraTarget& t : adapters.targets())
    for (int64_t k = 0; k < t.out * lc.rank; ++k) w[t.b + k] = 0.01f * static_cast<float>(k % 7);
  const std::string adapter = (dir_ / "adapter").string();
  adapters.save_peft(adapter);
  const std::string out = (dir_ / "merged").string();
  CliResult r = run_cli("export " + qwen_ + " " + out + " --dtype fp32 --merge-lora " + adapter);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("LoRA rank 4"), std::string::npos) << r.output;
  ParameterStore expected = base.clone();
  adapters.merge(ExecContext::cpu(), base, expected);
  const ParameterStore written = load_model_checkpoint(out);
  EXPECT_EQ(std::memcmp(expected.flat().raw(), written.flat().raw(), written.flat().nbytes()), 0);
  EXPECT_NE(std::memcmp(base.flat().raw(), written.flat().raw(), written.flat().nbytes()), 0);

  ModelConfig other = base.config();
  other.intermediate_size += 8;
  LoraAdapters(other, lc).save_peft((dir_ / "other").string());
  r = run_cli("export " + qwen_ + " " + (dir_ / "merged2").string() + " --merge-lora " + (dir_ / "other").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("has shape"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "merged2"));
}

}  // namespace
}  // namespace rlcpp
