// Text to token ids and back, as the loop uses it: the Tokenizer interface, and the character tokenizer of
// docs/benchmarks.md (one id per character, no merges) for the arithmetic tasks:
//   0 PAD, 1 BOS, 2 EOS, 3..17 "0123456789+-*= " (docs/benchmarks.md), 18..20 "()/" (for the countdown task's
//   expressions; the arithmetic tasks never produce them), 21..31 unused. The model's vocabulary is 32.
// A checkpoint with a tokenizer.json uses byte-level BPE instead (tokenizer/hf_tokenizer.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The ids of `text`, no BOS or EOS added; throws naming what cannot be encoded.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // A response's text for a scorer: special tokens (PAD, BOS, EOS, a chat's markers) produce nothing, and an
  // id with no token (e.g. an embedding row past the tokenizer's vocabulary) decodes as a visible placeholder,
  // so a scorer sees a wrong answer rather than a silently shortened one. Ids must be in [0, 2^31).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The ids as the model sees them, every special token written out (a chat's <|im_start|>, the character
  // tokenizer's <bos>): what `generate --show-prompt` prints. An id with no token shows as U+FFFD.
  virtual std::string render(const std::vector<int32_t>& ids) const = 0;
  // Put before every prompt when set (the character tokenizer's BOS, Llama-3's <|begin_of_text|>); Qwen has none.
  virtual std::optional<int32_t> bos_id() const = 0;
  // Ends every response and SFT target.
  virtual int32_t eos_id() const = 0;
  // One more than the largest id; the model's vocabulary must hold it.
  virtual int32_t vocab_size() const = 0;
  // The characters a task's text may use ("" = any UTF-8 text).
  virtual std::string charset() const = 0;
  // For messages: "the character tokenizer", "the tokenizer.json at DIR".
  virtual std::string describe() const = 0;
  // A prompt's ids: BOS (when set) and the text. A tokenizer that formats prompts as chats
  // (tokenizer/hf_tokenizer.h) renders the text as a user turn through its chat template instead, and a
  // conversation (`messages`: [{"role", "content"}, ...], not null) always goes through the template, with
  // `tools` (each tool's JSON text as the template's `tojson` writes it) listed where the template lists them.
  virtual std::vector<int32_t> encode_prompt(const std::string& text, const Json& messages,
                                             const std::vector<std::string>& tools = {}) const;
};

// "0123456789+-*= ()/": the character with index i has id 3 + i.
std::string char_tokenizer_charset();

class CharTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kPadId = 0;
  static constexpr int32_t kBosId = 1;
  static constexpr int32_t kEosId = 2;
  static constexpr int32_t kFirstCharId = 3;
  static constexpr int32_t kVocabSize = 32;

  CharTokenizer();

  // One id per character, no BOS/EOS added; throws naming the character and its index when one is not in
  // the charset.
  std::vector<int32_t> encode(const std::string& text) const override;
  // PAD, BOS and EOS produce nothing (decoding does not stop at EOS); the unused ids 21..31 decode as '?'
  // so a scorer sees a wrong answer rather than a silently shortened one. Ids outside [0, 32) throw.
  std::string decode(const std::vector<int32_t>& ids) const override;
  // <pad>, <bos> and <eos> written out, the unused ids as '?'.
  std::string render(const std::vector<int32_t>& ids) const override;

  bool can_encode(char c) const { return id_of_[static_cast<unsigned char>(c)] >= 0; }
  std::string charset() const override { return char_tokenizer_charset(); }
  std::string describe() const override { return "the character tokenizer"; }
  int32_t pad_id() const { return kPadId; }
  std::optional<int32_t> bos_id() const override { return kBosId; }
  int32_t eos_id() const override { return kEosId; }
  int32_t vocab_size() const override { return kVocabSize; }

 private:
  int32_t id_of_[256];  // -1 for characters outside the charset
};

}  // namespace rlcpp
