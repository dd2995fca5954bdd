#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/utf8.h"

namespace rlcpp {

namespace {

constexpr char kCharset[] = "0123456789+-*= ()/";
constexpr int32_t kCharsetSize = sizeof(kCharset) - 1;
static_assert(CharTokenizer::kFirstCharId + kCharsetSize <= CharTokenizer::kVocabSize);

}  // namespace

std::string char_tokenizer_charset() { return kCharset; }

std::vector<int32_t> Tokenizer::encode_prompt(const std::string& text, const Json& messages,
                                              const std::vector<std::string>& tools) const {
  RLCPP_CHECK(messages.is_null() && tools.empty(), "a conversation (\"messages\") needs a tokenizer.json with a chat template; "
                                      << describe() << " has none");
  std::vector<int32_t> ids;
  if (const std::optional<int32_t> bos = bos_id()) ids.push_back(*bos);
  for (int32_t id : encode(text)) ids.push_back(id);
  return ids;
}

CharTokenizer::CharTokenizer() {
  for (int32_t& id : id_of_) id = -1;
  for (int32_t i = 0; i < kCharsetSize; ++i) id_of_[static_cast<unsigned char>(kCharset[i])] = kFirstCharId + i;
}

std::vector<int32_t> CharTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int32_t id = id_of_[static_cast<unsigned char>(text[i])];
    RLCPP_CHECK(id >= 0, "tokenizer: character " << describe_character(text, i) << " at byte " << i << " of \""
                                                 << utf8_lossy(text) << "\" is not in the charset \"" << kCharset
                                                 << "\"");
    ids.push_back(id);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    RLCPP_CHECK(id >= 0 && id < kVocabSize, "tokenizer: id " << id << " at index " << i
                                                             << " is outside the vocabulary [0, " << kVocabSize << ")");
    if (id < kFirstCharId) continue;  // PAD, BOS, EOS
    out += id < kFirstCharId + kCharsetSize ? kCharset[id - kFirstCharId] : '?';
  }
  return out;
}

std::string CharTokenizer::render(const std::vector<int32_t>& ids) const {
  static constexpr const char* kSpecial[kFirstCharId] = {"<pad>", "<bos>", "<eos>"};
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= kVocabSize) out += "\xEF\xBF\xBD";  // U+FFFD: no token has this id
    else if (id < kFirstCharId) out += kSpecial[id];
    else out += decode({id});
  }
  return out;
}

}  // namespace rlcpp
