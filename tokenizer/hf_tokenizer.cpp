#include "tokenizer/hf_tokenizer.h"

#include <filesystem>

#include "core/config.h"
#include "core/error.h"

namespace rlcpp {

namespace {

namespace fs = std::filesystem;

std::string json_file_of(const std::string& path) {
  if (!fs::is_directory(path)) return path;
  const std::string file = (fs::path(path) / "tokenizer.json").string();
  RLCPP_CHECK(fs::exists(file), "tokenizer: the directory '" << path << "' has no tokenizer.json");
  return file;
}

// A token named in tokenizer_config.json: "<s>" or {"content": "<s>", ...}; "" when null or absent.
std::string config_token(const Json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  RLCPP_CHECK(it->is_object() && it->contains("content") && (*it)["content"].is_string(),
              where << ": \"" << key << "\" must be a token string or {\"content\": ...}, got " << json_excerpt(*it));
  return (*it)["content"].get<std::string>();
}

}  // namespace

HfTokenizer::HfTokenizer(const std::string& path, const ModelConfig& model, const ChatOptions& chat)
    : json_path_(json_file_of(path)), bpe_(BpeTokenizer::load(json_path_)), chat_(chat) {
  RLCPP_CHECK(bpe_.vocab_size() <= model.vocab_size,
              json_path_ << ": the tokenizer's ids reach " << bpe_.vocab_size() - 1 << ", past the model's vocabulary of "
                         << model.vocab_size << " (its vocab_size): use a model of this tokenizer's vocabulary, the "
                         << "checkpoint it came with or a preset such as \"qwen-tiny\" (the Qwen3 tokenizer's "
                         << "151,669 ids)");
  RLCPP_CHECK(model.eos_token_id >= 0 && model.eos_token_id < bpe_.vocab_size() &&
                  !bpe_.token_text(static_cast<int32_t>(model.eos_token_id)).empty(),
              json_path_ << ": the model's eos_token_id " << model.eos_token_id << " is not one of its tokens");
  eos_ = static_cast<int32_t>(model.eos_token_id);
  if (!bpe_.prefix_ids().empty()) {
    RLCPP_CHECK(bpe_.prefix_ids().size() == 1, json_path_ << ": the post-processor puts "
                                                          << bpe_.prefix_ids().size()
                                                          << " tokens before a sequence; one (a BOS) is supported");
    bos_ = bpe_.prefix_ids()[0];
  }
  const fs::path config_file = fs::path(json_path_).parent_path() / "tokenizer_config.json";
  if (fs::exists(config_file)) read_tokenizer_config(config_file.string());
  RLCPP_CHECK(!chat.enabled || template_, "chat formatting (chat.enabled / --chat) needs a \"chat_template\" in the "
                                          "tokenizer_config.json beside " << json_path_ << "; there is none");
}

void HfTokenizer::read_tokenizer_config(const std::string& file) {
  config_path_ = file;
  const Json config = load_json_file(file, kTokenizerInput.named("a tokenizer_config.json"));
  template_ = ChatTemplate::of_tokenizer_config(config, file);  // checks that it is an object
  const auto add_bos = config.find("add_bos_token");
  if (!bos_ && add_bos != config.end() && add_bos->is_boolean() && add_bos->get<bool>()) {
    const std::string bos = config_token(config, "bos_token", config_path_);
    const std::optional<int32_t> id = bpe_.token_id(bos);
    RLCPP_CHECK(!bos.empty() && id, config_path_ << ": add_bos_token is true but the bos_token \"" << bos
                                                 << "\" is not a token of " << json_path_);
    bos_ = *id;
  }
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids) const { return text_of(ids, /*skip_special=*/true); }

std::string HfTokenizer::text_of(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string text;
  std::vector<int32_t> run;  // decoded together: a character may span tokens
  auto flush = [&] {
    text += bpe_.decode(run, skip_special);
    run.clear();
  };
  for (int32_t id : ids) {
    if (id >= 0 && id < bpe_.vocab_size() && !bpe_.token_text(id).empty()) {
      run.push_back(id);
    } else {
      flush();
      text += "\xEF\xBF\xBD";  // U+FFFD: no token has this id
    }
  }
  flush();
  return text;
}

std::vector<int32_t> HfTokenizer::encode_prompt(const std::string& text, const Json& messages,
                                                const std::vector<std::string>& tools) const {
  if (messages.is_null() && tools.empty() && !chat_.enabled) return Tokenizer::encode_prompt(text, messages);
  RLCPP_CHECK(template_, "a conversation (\"messages\") needs a \"chat_template\" in the tokenizer_config.json "
                         "beside " << json_path_ << "; there is none");
  std::vector<ChatMessage> turns;
  if (messages.is_null()) turns.push_back({"user", text, {}});
  else turns = chat_messages_from_json(messages, "prompt");
  if (!chat_.system.empty() && turns.front().role != "system") turns.insert(turns.begin(), {"system", chat_.system, {}});
  RLCPP_CHECK(turns.back().role == "user" || turns.back().role == "tool",
              "prompt: a conversation to continue must end with a user or tool message, not '" << turns.back().role
                                                                                              << "'");
  // The template writes any BOS itself (Llama-3's <|begin_of_text|>), as apply_chat_template(tokenize=True) does.
  return encode(template_->render(turns, /*add_generation_prompt=*/true, chat_.enable_thinking, tools).text);
}

std::vector<std::string> HfTokenizer::files() const {
  std::vector<std::string> out{json_path_};
  if (!config_path_.empty()) out.push_back(config_path_);
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path, const ModelConfig& model,
                                          const ChatOptions& chat) {
  if (path.empty()) {
    RLCPP_CHECK(!chat.enabled, "chat formatting (chat.enabled / --chat) needs a checkpoint or tokenizer with a "
                               "tokenizer.json and a chat template; the character tokenizer has none");
    RLCPP_CHECK(model.vocab_size >= CharTokenizer::kVocabSize,
                "the model's vocabulary (" << model.vocab_size << ") is smaller than the character tokenizer's ("
                                           << CharTokenizer::kVocabSize << ")");
    return std::make_unique<CharTokenizer>();
  }
  return std::make_unique<HfTokenizer>(path, model, chat);
}

std::string choose_tokenizer(const std::string& configured, const std::string& checkpoint) {
  if (!configured.empty()) return configured;
  return !checkpoint.empty() && fs::exists(fs::path(checkpoint) / "tokenizer.json") ? checkpoint : "";
}

std::vector<std::string> tokenizer_files(const Tokenizer& tokenizer) {
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer);
  return hf ? hf->files() : std::vector<std::string>{};
}

}  // namespace rlcpp
