// A model's anatomy from its shapes (report/model_anatomy.h, `rlcpp ledger`), worked by hand on Llama-3-8B's
// shapes: the parts sum to the parameter count, 128 KiB of bf16 KV per token (four times that without GQA), and
// the floors put a decode step on the bandwidth side and a prefill on the compute side of the machine's ridge.
#include <gtest/gtest.h>

#include "report/model_anatomy.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

// Meta's Llama-3-8B config.json (docs/learn/llama3_8b_config.json).
ModelConfig llama3_8b() {
  ModelConfig c;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.intermediate_size = 14336;
  c.max_position_embeddings = 8192;
  c.rope_theta = 5e5;
  c.tie_word_embeddings = false;
  return c;
}

double part(const std::vector<ParameterPart>& parts, const std::string& name) {
  for (const ParameterPart& p : parts)
    if (p.name == name) return p.count;
  ADD_FAILURE() << "no part " << name;
  return 0;
}

TEST(ModelAnatomy, PartsSumToTheParameterCountOfEveryFamily) {
  ModelConfig qwen3 = model_preset("tiny");
  qwen3.model_type = "qwen3";
  qwen3.explicit_head_dim = 48;
  ModelConfig critic = model_preset("tiny");
  critic.value_head = true;
  ModelConfig biased = model_preset("tiny");
  biased.attention_bias = true;
  for (const ModelConfig& m : {model_preset("tiny"), model_preset("qwen05b"), llama3_8b(), qwen3, critic, biased}) {
    double sum = 0;
    for (const ParameterPart& p : parameter_parts(m)) sum += p.count;
    EXPECT_EQ(sum, static_cast<double>(m.num_parameters())) << ledger_symbols(m);
  }
}

TEST(ModelAnatomy, Llama3_8BPartsByHand) {
  const std::vector<ParameterPart> parts = parameter_parts(llama3_8b());
  EXPECT_EQ(part(parts, "embedding"), 128256.0 * 4096);
  EXPECT_EQ(part(parts, "lm_head"), 128256.0 * 4096);
  EXPECT_EQ(part(parts, "attention"), 32.0 * (4096 * (32 + 16) * 128 + 32 * 128 * 4096));
  EXPECT_EQ(part(parts, "MLP"), 32.0 * 3 * 4096 * 14336);
  EXPECT_EQ(part(parts, "norms"), 32.0 * 2 * 4096 + 4096);
  const std::string text = format_model_anatomy(llama3_8b(), "llama3_8b", {.dtype = "bf16"});
  EXPECT_NE(text.find("parameters N = 8,030,261,248"), std::string::npos) << text;
  EXPECT_NE(text.find("MLP"), std::string::npos);
  EXPECT_NE(text.find("70.2 %"), std::string::npos) << text;  // 5,637,144,576 / 8,030,261,248
  // 2 · 32 layers · 8 KV heads · 128 · 2 bytes; 32 KV heads without GQA.
  EXPECT_NE(text.find("= 131,072 B (128 KiB); full multi-head attention (Hkv = Hq = 32): 524,288 B (512 KiB), 4x"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("16 B·N = 128 GB"), std::string::npos) << text;
  EXPECT_EQ(text.find("this machine"), std::string::npos) << "no floors without the machine's figures";
}

TEST(ModelAnatomy, DecodeIsBandwidthBoundAndPrefillComputeBound) {
  // W1 in fp32 (742,528 parameters, 2.97 MB) on a machine of 200 GFLOP/s and 25 GB/s: a decode token needs
  // 1.49 MFLOP (7.4 µs) but reads 2.97 MB (119 µs); a 512-token prefill needs 3.8 ms of compute for the same
  // read. The ridge: 200e9 · 4 / (2 · 25e9) = 16 tokens.
  AnatomyOptions o;
  o.matmul_peak_flops = 200e9;
  o.read_bandwidth = 25e9;
  const std::string text = format_model_anatomy(model_preset("tiny"), "tiny", o);
  EXPECT_NE(text.find("decode, 1 token:          compute 2N/peak = 7.43 µs, weight read bytes/bandwidth = 119 µs: "
                      "bandwidth-bound, floor 119 µs a token"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("prefill, 512 tokens:     compute 2N·512/peak = 3.8 ms, weight read 119 µs: compute-bound"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("from peak·bytes/(2·bandwidth) = 16 tokens"), std::string::npos) << text;
}

// --lora-rank: the adapters' count by hand (Qwen2.5-0.5B, rank 16 on q, k, v, o, gate, up, down of 24 layers:
// 24·16·((896+896) + 2·(896+128) + (896+896) + 3·(896+4864)) = 8,798,208) and LoRA's memory rule.
TEST(ModelAnatomy, LoraRankAddsItsTrainedParametersAndMemory) {
  AnatomyOptions o;
  o.lora_rank = 16;
  const std::string text = format_model_anatomy(model_preset("qwen05b"), "qwen05b", o);
  EXPECT_NE(text.find("Na = 8,798,208 trained parameters (1.78 % of N)"), std::string::npos) << text;
  EXPECT_NE(text.find("8 B·N + 16 B·Na = 4.09 GB"), std::string::npos) << text;
  EXPECT_NE(text.find("6 B·N + 16 B·Na = 3.1 GB with the base in bf16"), std::string::npos) << text;
  EXPECT_EQ(format_model_anatomy(model_preset("qwen05b"), "qwen05b", {}).find("LoRA"), std::string::npos);
}

TEST(ModelAnatomy, AnUnknownDtypeIsNamed) {
  expect_error([] { anatomy_dtype_bytes("fp64"); }, {"ledger --dtype: expected fp32, bf16, fp16 or int8, got 'fp64'"});
}

}  // namespace
}  // namespace rlcpp
