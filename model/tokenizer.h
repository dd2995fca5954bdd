// The character tokenizer of BENCHMARKS.md: one id per character, no merges.
//   0 PAD, 1 BOS, 2 EOS, 3..17 "0123456789+-*= " (BENCHMARKS.md), 18..20 "()/" (for the countdown task's
//   expressions; the arithmetic tasks never produce them), 21..31 unused. The model's vocabulary is 32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlcpp {

// "0123456789+-*= ()/": the character with index i has id 3 + i.
std::string char_tokenizer_charset();

class CharTokenizer {
 public:
  static constexpr int32_t kPadId = 0;
  static constexpr int32_t kBosId = 1;
  static constexpr int32_t kEosId = 2;
  static constexpr int32_t kFirstCharId = 3;
  static constexpr int32_t kVocabSize = 32;

  CharTokenizer();

  // One id per character, no BOS/EOS added; throws naming the character and its index when one is not in
  // the charset.
  std::vector<int32_t> encode(const std::string& text) const;
  // PAD, BOS and EOS produce nothing (decoding does not stop at EOS); the unused ids 21..31 decode as '?'
  // so a scorer sees a wrong answer rather than a silently shortened one. Ids outside [0, 32) throw.
  std::string decode(const std::vector<int32_t>& ids) const;

  bool can_encode(char c) const { return id_of_[static_cast<unsigned char>(c)] >= 0; }
  std::string charset() const { return char_tokenizer_charset(); }
  int32_t pad_id() const { return kPadId; }
  int32_t bos_id() const { return kBosId; }
  int32_t eos_id() const { return kEosId; }
  int32_t vocab_size() const { return kVocabSize; }

 private:
  int32_t id_of_[256];  // -1 for characters outside the charset
};

}  // namespace rlcpp
