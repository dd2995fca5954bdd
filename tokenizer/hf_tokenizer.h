// The Tokenizer of a Hugging Face checkpoint: its tokenizer.json (byte-level BPE, tokenizer/bpe_tokenizer.h), the
// BOS its post-processor or tokenizer_config.json puts before a prompt, and the model's eos_token_id as EOS.
// A checkpoint directory with a tokenizer.json uses it automatically; one without uses the character tokenizer.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/chat_template.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace rlcpp {

class HfTokenizer final : public Tokenizer {
 public:
  // `path`: a tokenizer.json, or a directory holding one (and perhaps tokenizer_config.json). Fails, naming
  // the file, when its vocabulary does not fit the model's or the model's EOS is not one of its tokens.
  // `chat`: how prompts are formatted; enabled needs a chat_template in the tokenizer_config.json beside it.
  HfTokenizer(const std::string& path, const ModelConfig& model, const ChatOptions& chat = {});

  std::vector<int32_t> encode(const std::string& text) const override { return bpe_.encode(text); }
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string render(const std::vector<int32_t>& ids) const override { return text_of(ids, /*skip_special=*/false); }
  std::optional<int32_t> bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t vocab_size() const override { return bpe_.vocab_size(); }
  std::string charset() const override { return ""; }
  std::string describe() const override { return "the tokenizer.json at " + json_path_; }
  std::vector<int32_t> encode_prompt(const std::string& text, const Json& messages,
                                     const std::vector<std::string>& tools = {}) const override;
  const std::optional<ChatTemplate>& chat_template() const { return template_; }

  const BpeTokenizer& bpe() const { return bpe_; }
  // The files to copy beside a saved checkpoint: tokenizer.json and, when there is one, tokenizer_config.json.
  std::vector<std::string> files() const;

 private:
  // The BOS (add_bos_token + bos_token) and the chat template of tokenizer_config.json.
  void read_tokenizer_config(const std::string& file);
  // The text of `ids`, special tokens left out or written out, U+FFFD for an id no token has.
  std::string text_of(const std::vector<int32_t>& ids, bool skip_special) const;

  std::string json_path_, config_path_;
  BpeTokenizer bpe_;
  std::optional<int32_t> bos_;
  int32_t eos_ = 0;
  ChatOptions chat_;
  std::optional<ChatTemplate> template_;
};

// `path` "" = the character tokenizer (which has no chat formatting); otherwise an HfTokenizer of that
// tokenizer.json or directory.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, const ModelConfig& model,
                                          const ChatOptions& chat = {});
// The tokenizer a run or command uses: `configured` when given, else `checkpoint` when that directory holds a
// tokenizer.json, else "" (the character tokenizer).
std::string choose_tokenizer(const std::string& configured, const std::string& checkpoint);
// The files a checkpoint saved with this tokenizer carries (save_model_checkpoint's extra_files), so that it
// loads with its tokenizer in rlcpp and `transformers` alike; none for the character tokenizer.
std::vector<std::string> tokenizer_files(const Tokenizer& tokenizer);

}  // namespace rlcpp
