// Byte-level BPE from a Hugging Face `tokenizer.json` (the Qwen2/Qwen2.5/Qwen3, Llama-3 and GPT-2 families),
// computing the ids that the `tokenizers` library computes (tests/tokenizer_bpe_test.cpp checks them on a
// multilingual corpus). encode, in the library's order:
//   1. added tokens (`added_tokens`, special or not) are found in the raw text first, leftmost and longest,
//      and are never split; lstrip / rstrip take the whitespace beside them along;
//   2. each stretch between them is normalised (`normalizer`: NFC, NFD, NFKC, NFKD or a Sequence; utf8proc),
//   3. split into pieces by the pre-tokenizer (`Split` with a regex, behaviour Isolated, run by PCRE2 with
//      Unicode properties; `ByteLevel`, whose bytes map to printable characters as GPT-2's do, with its own
//      regex when use_regex is set),
//   4. each piece's bytes are merged by rank (`model.merges`, lowest rank first, leftmost first among equal
//      ranks); with `ignore_merges` (Llama-3) a piece that is itself in the vocabulary is one token.
// decode maps ids back to bytes (added tokens give their text) and the text back to UTF-8, bytes that do not
// form a character becoming U+FFFD as the library's byte-level decoder does.
// Anything else in the file (a WordPiece or Unigram model, byte_fallback, another pre-tokenizer) is refused
// with an error naming the field, never guessed at.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rlcpp {

class BpeTokenizer {
 public:
  // Reads `path` (a tokenizer.json); errors name the file and the field.
  static BpeTokenizer load(const std::string& path);
  // From the file's text; `where` names it in errors.
  static BpeTokenizer parse(std::string_view json_text, const std::string& where);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // The ids of `text` (valid UTF-8; otherwise an error giving the byte offset), no BOS/EOS added: what
  // `tokenizers`' encode(text, add_special_tokens=False) gives. Thread-safe.
  std::vector<int32_t> encode(std::string_view text) const;
  // The text of `ids`; special added tokens are left out when skip_special. An id outside [0, vocab_size())
  // or one with no token throws, naming its index.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  // One more than the largest id (the model's embedding may have more rows).
  int32_t vocab_size() const;
  // The id of a token given as its text (an added token's content, or a vocabulary entry in its byte-level
  // spelling, e.g. "Ġthe"); none when there is no such token.
  std::optional<int32_t> token_id(std::string_view token) const;
  // The token's spelling as tokenizer.json writes it (byte-level characters for vocabulary entries).
  const std::string& token_text(int32_t id) const;
  // The bytes the token stands for (what decode joins): a vocabulary entry's byte-level spelling mapped back
  // to its bytes (which may be part of a UTF-8 character), an added token's text. An id outside [0,
  // vocab_size()) or with no token throws.
  std::string token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  // The ids the file's post-processor puts before a single sequence (a TemplateProcessing such as Llama-3's
  // <|begin_of_text|>; none for ByteLevel): what encode(text, add_special_tokens=True) adds in front.
  const std::vector<int32_t>& prefix_ids() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcpp
