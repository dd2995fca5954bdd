// The tokenizer of a Hugging Face checkpoint (tokenizer/hf_tokenizer.h) against the model it serves: its vocabulary
// and special tokens must fit the model's config.
#include <gtest/gtest.h>

#include <string>

#include "model/model_config.h"
#include "tests/error_test_support.h"
#include "tests/test_fixtures.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp {
namespace {

// The qwen-tiny preset holds the Qwen3 tokenizer's ids exactly (151,669 with its special tokens), ends a turn with
// <|im_end|>, and is small enough to train in seconds; the tiny preset's error with that tokenizer points at it.
TEST(ModelPresets, QwenTinyHoldsTheQwen3TokenizersVocabulary) {
  const std::string qwen3 = qwen3_fixture_dir();
  const ModelConfig c = model_preset("qwen-tiny");
  c.validate("qwen-tiny");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.vocab_size, 151669);
  EXPECT_LT(c.num_parameters(), 10'000'000);
  const HfTokenizer tok(qwen3, c);
  EXPECT_EQ(tok.vocab_size(), c.vocab_size);
  EXPECT_EQ(tok.eos_id(), tok.bpe().token_id("<|im_end|>"));
  EXPECT_EQ(c.bos_token_id, tok.bpe().token_id("<|endoftext|>"));
  expect_error([&] { HfTokenizer(qwen3, model_preset("tiny")); },
               {"past the model's vocabulary of 32", "\"qwen-tiny\""});
  expect_error([] { model_preset("qwen_tiny"); }, {"unknown model preset 'qwen_tiny'", "\"qwen-tiny\""});
}

}  // namespace
}  // namespace rlcpp
