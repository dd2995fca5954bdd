#include "tokenizer/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <queue>

#include "core/config.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"
#include "core/utf8.h"

namespace rlcpp {

namespace {

// ---- GPT-2's byte-level alphabet: every byte is a printable character ----

struct ByteLevelAlphabet {
  std::array<std::string, 256> char_of_byte;           // UTF-8 of the character standing for each byte
  std::unordered_map<uint32_t, uint8_t> byte_of_char;  // its code point -> the byte
  ByteLevelAlphabet() {
    std::vector<int> kept;  // bytes that stand for themselves
    for (int b = '!'; b <= '~'; ++b) kept.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) kept.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) kept.push_back(b);
    std::array<uint32_t, 256> cp{};
    std::array<bool, 256> is_kept{};
    for (int b : kept) cp[b] = static_cast<uint32_t>(b), is_kept[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b)
      if (!is_kept[b]) cp[b] = next++;
    for (int b = 0; b < 256; ++b) {
      char_of_byte[b] = utf8_encode(cp[b]);
      byte_of_char[cp[b]] = static_cast<uint8_t>(b);
    }
  }
};

const ByteLevelAlphabet& byte_level() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

// The bytes a byte-level spelling stands for; none when a character is outside the alphabet.
std::optional<std::string> bytes_of_spelling(std::string_view spelling) {
  std::string out;
  out.reserve(spelling.size());
  size_t i = 0;
  while (i < spelling.size()) {
    const std::optional<uint32_t> cp = utf8_next(spelling, i);
    if (!cp) return std::nullopt;
    const auto it = byte_level().byte_of_char.find(*cp);
    if (it == byte_level().byte_of_char.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

// The bound on the ids of a table of `entries` tokens: room for holes (reserved ids), none for a table that is
// mostly empty; never past 2^30.
int64_t dense_id_limit(int64_t entries) { return std::min<int64_t>(2 * entries + 1024, int64_t{1} << 30); }

// ---- regexes (PCRE2, Unicode properties on, JIT-compiled) ----

struct Pcre2CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
using Pcre2Code = std::unique_ptr<pcre2_code, Pcre2CodeDeleter>;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

Pcre2Code compile_regex(const std::string& pattern, bool literal, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // A literal ({"String": ...}, which tokenizers escapes into a regex) takes no UCP: PCRE2 refuses that pair.
  const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  Pcre2Code code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                               &offset, nullptr));
  RLCPP_CHECK(code, where << ": the pattern does not compile at offset " << offset << ": " << pcre2_message(error));
  pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);  // when JIT is unavailable matching is interpreted
  return code;
}

// Per thread: the JIT stack (the default 32 KiB is too small for long runs of whitespace) and match data.
struct MatchScratch {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

MatchScratch& match_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

// Calls on_piece(begin, end, is_match) for the matches of `code` in `text` and the stretches between them, in
// order, covering the text: tokenizers' find_matches over Oniguruma's find_iter. An empty match is a piece too
// (so "" splits a text into its characters), except one where the previous match ended, which is skipped by
// one character. An empty text has no pieces.
template <class OnPiece>
void for_each_split(const pcre2_code* code, std::string_view text, OnPiece&& on_piece) {
  MatchScratch& scratch = match_scratch();
  size_t at = 0, gap_start = 0;
  std::optional<size_t> last_match_end;
  while (at <= text.size()) {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at,
                               PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    RLCPP_CHECK(rc >= 0, "tokenizer: the pre-tokenizer's regex failed on a piece of " << text.size()
                                                                                      << " bytes: " << pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
    const size_t begin = ov[0], end = ov[1];
    if (end == begin && last_match_end == end) {  // empty where the last match ended: step over one character
      if (at >= text.size()) break;
      ++at;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    if (begin > gap_start) on_piece(gap_start, begin, false);
    on_piece(begin, end, true);
    at = gap_start = end;
    last_match_end = end;
  }
  if (gap_start < text.size()) on_piece(gap_start, text.size(), false);
}

// GPT-2's split, which ByteLevel applies itself when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---- the parts of tokenizer.json ----

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

struct PreTokenizerStep {
  enum Kind { kSplit, kByteLevel } kind = kSplit;
  Pcre2Code regex;  // kSplit, and kByteLevel with use_regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool add_prefix_space = false;  // kByteLevel
};

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

std::string where_of(const std::string& file, const std::string& field) { return file + ": " + field; }

const Json& member(const Json& object, const char* key, const std::string& where) {
  RLCPP_CHECK(object.is_object(), where << " must be an object, got " << json_excerpt(object));
  const auto it = object.find(key);
  RLCPP_CHECK(it != object.end(), where << " has no '" << key << "'");
  return *it;
}

std::string string_member(const Json& object, const char* key, const std::string& where) {
  const Json& v = member(object, key, where);
  RLCPP_CHECK(v.is_string(), where << "." << key << " must be a string, got " << json_excerpt(v));
  return v.get<std::string>();
}

bool bool_member(const Json& object, const char* key, bool fallback, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  RLCPP_CHECK(it->is_boolean(), where << "." << key << " must be true or false, got " << json_excerpt(*it));
  return it->get<bool>();
}

// utf8proc's options for one normaliser type.
utf8proc_option_t normalizer_options(const std::string& type, const std::string& where) {
  if (type == "NFC") return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  RLCPP_FAIL(where << ": unsupported normalizer type '" << type
                   << "' (supported: NFC, NFD, NFKC, NFKD and a Sequence of them)");
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

// Leftmost-longest search for added tokens.
class AddedTokenMatcher {
 public:
  void add(const AddedToken* token) {
    if (token->content.empty()) return;
    by_first_byte_[static_cast<unsigned char>(token->content[0])].push_back(token);
  }
  bool empty() const {
    return std::all_of(by_first_byte_.begin(), by_first_byte_.end(), [](const auto& v) { return v.empty(); });
  }
  // The first match at or after `from`: {begin, end (both including stripped whitespace), token}.
  struct Match {
    size_t begin = 0, end = 0;
    const AddedToken* token = nullptr;
  };
  std::optional<Match> find(std::string_view text, size_t from) const {
    for (size_t i = from; i < text.size(); ++i) {
      const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[i])];
      const AddedToken* best = nullptr;
      for (const AddedToken* t : candidates) {
        if (t->content.size() > text.size() - i || (best && t->content.size() <= best->content.size())) continue;
        if (text.compare(i, t->content.size(), t->content) != 0) continue;
        const size_t end = i + t->content.size();
        if (t->single_word && ((i > 0 && is_word_byte(text[i - 1])) || (end < text.size() && is_word_byte(text[end]))))
          continue;
        best = t;
      }
      if (!best) continue;
      Match m{i, i + best->content.size(), best};
      if (best->lstrip)
        while (m.begin > from && is_space(text[m.begin - 1])) --m.begin;
      if (best->rstrip)
        while (m.end < text.size() && is_space(text[m.end])) ++m.end;
      return m;
    }
    return std::nullopt;
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
  static bool is_word_byte(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    return u >= 0x80 || std::isalnum(u) || u == '_';
  }
  std::array<std::vector<const AddedToken*>, 256> by_first_byte_;
};

}  // namespace

struct BpeTokenizer::Impl {
  std::string where;
  std::vector<utf8proc_option_t> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizer;
  bool ignore_merges = false;

  std::unordered_map<std::string, int32_t> id_of_spelling;  // vocabulary and added tokens, as written
  std::unordered_map<std::string, int32_t> id_of_bytes;     // vocabulary entries by the bytes they stand for
  std::array<int32_t, 256> byte_id{};                       // the single-byte tokens (-1: none)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (left, right) -> (rank, merged id)
  std::vector<std::string> spelling;                        // by id ("" for a hole)
  std::vector<char> special;                                // by id
  std::vector<AddedToken> added;
  std::vector<int32_t> prefix;  // of the post-processor
  AddedTokenMatcher raw_matcher, normalized_matcher;  // added tokens matched before / after normalisation

  static constexpr size_t kCacheEntries = 200000, kCacheMaxPiece = 256;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;  // piece bytes -> ids

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void load_model(const Json& model);
  void load_added_tokens(const Json& tokens);
  void load_normalizer(const Json& normalizer, const std::string& field);
  void load_pre_tokenizer(const Json& step, const std::string& field);
  void load_post_processor(const Json& processor, const std::string& field);

  std::string normalize(std::string_view text) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;
  void merge_piece(std::string_view piece, std::vector<int32_t>& ids) const;
  void encode_segment(std::string_view raw, std::vector<int32_t>& ids) const;
};

void BpeTokenizer::Impl::load_model(const Json& model) {
  const std::string field = where_of(where, "model");
  const std::string type = model.is_object() && model.contains("type") ? string_member(model, "type", field) : "BPE";
  RLCPP_CHECK(type == "BPE", field << ".type is '" << type << "': only byte-level BPE models are supported");
  RLCPP_CHECK(!bool_member(model, "byte_fallback", false, field),
              field << ".byte_fallback is true (a SentencePiece-style BPE): only byte-level BPE is supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    RLCPP_CHECK(it == model.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()),
                field << "." << key << " is " << json_excerpt(*it) << ": not supported (byte-level BPE has none)");
  }
  const auto dropout = model.find("dropout");
  RLCPP_CHECK(dropout == model.end() || dropout->is_null() || (dropout->is_number() && dropout->get<double>() == 0),
              field << ".dropout is " << json_excerpt(*dropout) << ": BPE dropout is not supported");
  ignore_merges = bool_member(model, "ignore_merges", false, field);

  const Json& vocab = member(model, "vocab", field);
  RLCPP_CHECK(vocab.is_object(), field << ".vocab must be an object of token -> id, got " << json_excerpt(vocab));
  int32_t max_id = -1;
  // Ids index a dense table: one far past the vocabulary's size (a typo, a hostile file) would make a small
  // file allocate gigabytes before anything else is checked.
  const int64_t id_limit = dense_id_limit(static_cast<int64_t>(vocab.size()));
  for (const auto& [token, id] : vocab.items()) {
    RLCPP_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < id_limit,
                field << ".vocab[\"" << token << "\"] must be an id in [0, " << id_limit << ") (ids are dense: at "
                      << "most twice the " << vocab.size() << " entries, + 1024), got " << json_excerpt(id));
    max_id = std::max(max_id, id.get<int32_t>());
  }
  spelling.assign(static_cast<size_t>(max_id + 1), "");
  special.assign(spelling.size(), 0);
  byte_id.fill(-1);
  id_of_spelling.reserve(vocab.size());
  id_of_bytes.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    const int32_t id = id_json.get<int32_t>();
    RLCPP_CHECK(spelling[id].empty(),
                field << ".vocab gives id " << id << " to both \"" << spelling[id] << "\" and \"" << token << "\"");
    spelling[id] = token;
    id_of_spelling.emplace(token, id);
    if (std::optional<std::string> bytes = bytes_of_spelling(token)) {
      if (bytes->size() == 1) byte_id[static_cast<unsigned char>((*bytes)[0])] = id;
      id_of_bytes.emplace(std::move(*bytes), id);
    }
  }

  const Json& list = member(model, "merges", field);
  RLCPP_CHECK(list.is_array(), field << ".merges must be an array, got " << json_excerpt(list));
  merges.reserve(list.size());
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const Json& m = list[rank];
    const std::string at = field + ".merges[" + std::to_string(rank) + "]";
    std::string left, right;
    if (m.is_string()) {  // "left right"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      RLCPP_CHECK(space != std::string::npos && space > 0 && space + 1 < s.size() &&
                      s.find(' ', space + 1) == std::string::npos,
                  at << " is \"" << s << "\": a merge is two tokens separated by one space");
      left = s.substr(0, space), right = s.substr(space + 1);
    } else {  // ["left", "right"]
      RLCPP_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                  at << " must be \"left right\" or [\"left\", \"right\"], got " << json_excerpt(m));
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    }
    const auto l = id_of_spelling.find(left), r = id_of_spelling.find(right),
               merged = id_of_spelling.find(left + right);
    RLCPP_CHECK(l != id_of_spelling.end(), at << ": \"" << left << "\" is not in the vocabulary");
    RLCPP_CHECK(r != id_of_spelling.end(), at << ": \"" << right << "\" is not in the vocabulary");
    RLCPP_CHECK(merged != id_of_spelling.end(), at << ": the merged token \"" << left + right
                                                   << "\" is not in the vocabulary");
    merges.emplace(pair_key(l->second, r->second), std::make_pair(static_cast<int32_t>(rank), merged->second));
  }
}

void BpeTokenizer::Impl::load_added_tokens(const Json& tokens) {
  const std::string field = where_of(where, "added_tokens");
  if (tokens.is_null()) return;
  RLCPP_CHECK(tokens.is_array(), field << " must be an array, got " << json_excerpt(tokens));
  added.reserve(tokens.size());
  const int64_t id_limit = dense_id_limit(static_cast<int64_t>(spelling.size() + tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    const Json& t = tokens[i];
    AddedToken a;
    const Json& id = member(t, "id", at);
    RLCPP_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < id_limit,
                at << ".id must be an id in [0, " << id_limit << ") (ids are dense: at most twice the vocabulary's "
                   << spelling.size() << " ids and the " << tokens.size() << " added tokens, + 1024), got "
                   << json_excerpt(id));
    a.id = id.get<int32_t>();
    a.content = string_member(t, "content", at);
    RLCPP_CHECK(!a.content.empty(), at << ".content is empty");
    RLCPP_CHECK(utf8_valid_prefix(a.content) == a.content.size(), at << ".content is not valid UTF-8");
    a.special = bool_member(t, "special", false, at);
    a.lstrip = bool_member(t, "lstrip", false, at);
    a.rstrip = bool_member(t, "rstrip", false, at);
    a.single_word = bool_member(t, "single_word", false, at);
    a.normalized = bool_member(t, "normalized", !a.special, at);
    added.push_back(std::move(a));
  }
  for (const AddedToken& a : added) {
    if (static_cast<size_t>(a.id) >= spelling.size()) {
      spelling.resize(static_cast<size_t>(a.id) + 1);
      special.resize(spelling.size(), 0);
    }
    const auto existing = id_of_spelling.find(a.content);
    RLCPP_CHECK(spelling[a.id].empty() || spelling[a.id] == a.content,
                field << ": id " << a.id << " is both \"" << spelling[a.id] << "\" and the added \"" << a.content
                      << "\"");
    RLCPP_CHECK(existing == id_of_spelling.end() || existing->second == a.id,
                field << ": \"" << a.content << "\" has id " << existing->second << " and the added id " << a.id);
    spelling[a.id] = a.content;
    special[a.id] = a.special;
    id_of_spelling[a.content] = a.id;
  }
  for (const AddedToken& a : added) (a.normalized ? normalized_matcher : raw_matcher).add(&a);
}

void BpeTokenizer::Impl::load_normalizer(const Json& normalizer, const std::string& field) {
  if (normalizer.is_null()) return;
  const std::string type = string_member(normalizer, "type", field);
  if (type == "Sequence") {
    const Json& list = member(normalizer, "normalizers", field);
    RLCPP_CHECK(list.is_array(), field << ".normalizers must be an array, got " << json_excerpt(list));
    for (size_t i = 0; i < list.size(); ++i)
      load_normalizer(list[i], field + ".normalizers[" + std::to_string(i) + "]");
    return;
  }
  normalizers.push_back(normalizer_options(type, field + ".type"));
}

void BpeTokenizer::Impl::load_pre_tokenizer(const Json& step, const std::string& field) {
  if (step.is_null()) return;
  const std::string type = string_member(step, "type", field);
  if (type == "Sequence") {
    const Json& list = member(step, "pretokenizers", field);
    RLCPP_CHECK(list.is_array(), field << ".pretokenizers must be an array, got " << json_excerpt(list));
    for (size_t i = 0; i < list.size(); ++i)
      load_pre_tokenizer(list[i], field + ".pretokenizers[" + std::to_string(i) + "]");
    return;
  }
  PreTokenizerStep s;
  if (type == "Split") {
    s.kind = PreTokenizerStep::kSplit;
    const Json& pattern = member(step, "pattern", field);
    RLCPP_CHECK(pattern.is_object() && pattern.size() == 1 && (pattern.contains("Regex") || pattern.contains("String")),
                field << ".pattern must be {\"Regex\": ...} or {\"String\": ...}, got " << json_excerpt(pattern));
    const bool literal = pattern.contains("String");
    s.regex = compile_regex(string_member(pattern, literal ? "String" : "Regex", field + ".pattern"), literal,
                            field + ".pattern");
    const std::string behavior = step.contains("behavior") ? string_member(step, "behavior", field) : "Isolated";
    if (behavior == "Isolated") s.behavior = SplitBehavior::kIsolated;
    else if (behavior == "Removed") s.behavior = SplitBehavior::kRemoved;
    else if (behavior == "MergedWithPrevious") s.behavior = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") s.behavior = SplitBehavior::kMergedWithNext;
    else RLCPP_FAIL(field << ".behavior '" << behavior << "' is not supported (Isolated, Removed, MergedWithPrevious, "
                          << "MergedWithNext)");
    RLCPP_CHECK(!bool_member(step, "invert", false, field), field << ".invert = true is not supported");
  } else if (type == "ByteLevel") {
    s.kind = PreTokenizerStep::kByteLevel;
    s.add_prefix_space = bool_member(step, "add_prefix_space", true, field);
    if (bool_member(step, "use_regex", true, field)) s.regex = compile_regex(kGpt2Pattern, false, field);
  } else {
    RLCPP_FAIL(field << ".type '" << type << "' is not supported (Split, ByteLevel and a Sequence of them)");
  }
  pre_tokenizer.push_back(std::move(s));
}

void BpeTokenizer::Impl::load_post_processor(const Json& processor, const std::string& field) {
  if (processor.is_null()) return;
  const std::string type = string_member(processor, "type", field);
  if (type == "Sequence") {
    const Json& list = member(processor, "processors", field);
    RLCPP_CHECK(list.is_array(), field << ".processors must be an array, got " << json_excerpt(list));
    for (size_t i = 0; i < list.size(); ++i)
      load_post_processor(list[i], field + ".processors[" + std::to_string(i) + "]");
    return;
  }
  if (type != "TemplateProcessing") return;  // ByteLevel and the like add no tokens
  const Json& single = member(processor, "single", field);
  RLCPP_CHECK(single.is_array(), field << ".single must be an array, got " << json_excerpt(single));
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = field + ".single[" + std::to_string(i) + "]";
    if (single[i].is_object() && single[i].contains("Sequence")) break;  // the text itself: what follows is after
    const Json& special_token = member(member(single[i], "SpecialToken", at), "id", at + ".SpecialToken");
    RLCPP_CHECK(special_token.is_string(), at << ".SpecialToken.id must be a string, got " << json_excerpt(special_token));
    const auto id = id_of_spelling.find(special_token.get<std::string>());
    RLCPP_CHECK(id != id_of_spelling.end(),
                at << ": the special token \"" << special_token.get<std::string>() << "\" is not a token");
    prefix.push_back(id->second);
  }
}

std::string BpeTokenizer::Impl::normalize(std::string_view text) const {
  std::string out(text);
  if (normalizers.empty() || is_ascii(text)) return out;  // ASCII is in every normal form
  for (utf8proc_option_t options : normalizers) {
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(out.data()),
                                            static_cast<utf8proc_ssize_t>(out.size()), &mapped, options);
    RLCPP_CHECK(n >= 0, "tokenizer: cannot normalise the text: " << utf8proc_errmsg(n));
    out.assign(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    std::free(mapped);
  }
  return out;
}

void BpeTokenizer::Impl::merge_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  if (ignore_merges) {
    const auto whole = id_of_bytes.find(std::string(piece));
    if (whole != id_of_bytes.end()) {
      ids.push_back(whole->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1: none
    bool gone;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) {
    const int32_t id = byte_id[static_cast<unsigned char>(c)];
    if (id < 0) continue;  // a byte the vocabulary has no token for is dropped, as the library does
    const int32_t at = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, at - 1, -1, false});
    if (at > 0) symbols[at - 1].next = at;
  }
  struct Merge {
    int32_t rank, pos, new_id;
    bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Merge, std::vector<Merge>, std::greater<Merge>> queue;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges.end()) queue.push({it->second.first, pos, it->second.second});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& s = symbols[top.pos];
    if (s.gone || s.next < 0) continue;
    // A stale entry: the pair at this position has changed since it was queued.
    const auto it = merges.find(pair_key(s.id, symbols[s.next].id));
    if (it == merges.end() || it->second.second != top.new_id) continue;
    Symbol& right = symbols[s.next];
    s.id = top.new_id;
    right.gone = true;
    s.next = right.next;
    if (s.next >= 0) symbols[s.next].prev = top.pos;
    if (s.prev >= 0) push_pair(s.prev);
    push_pair(top.pos);
  }
  for (const Symbol& s : symbols)
    if (!s.gone) ids.push_back(s.id);
}

void BpeTokenizer::Impl::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  if (piece.size() > kCacheMaxPiece) {
    merge_piece(piece, ids);
    return;
  }
  const std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto hit = cache.find(key);
    if (hit != cache.end()) {
      ids.insert(ids.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  const size_t start = ids.size();
  merge_piece(piece, ids);
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() < kCacheEntries) cache.emplace(key, std::vector<int32_t>(ids.begin() + start, ids.end()));
}

namespace {

// tokenizers' NormalizedString::split of one piece: its pieces (for_each_split) combined as `behavior` says, the
// empty ones dropped, appended to `out`. Matches that follow a match stay on their own in the merged behaviours.
void split_piece(const pcre2_code* code, const std::string& piece, SplitBehavior behavior,
                 std::vector<std::string>& out) {
  std::vector<std::pair<size_t, size_t>> kept;  // [begin, end) of each piece, empty ones included
  bool previous_match = false;
  std::optional<std::pair<size_t, size_t>> pending;  // MergedWithNext: a match that takes the next non-match
  for_each_split(code, piece, [&](size_t b, size_t e, bool is_match) {
    switch (behavior) {
      case SplitBehavior::kIsolated:
        kept.emplace_back(b, e);
        break;
      case SplitBehavior::kRemoved:
        if (!is_match) kept.emplace_back(b, e);
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (is_match && !previous_match && !kept.empty())
          kept.back().second = e;
        else
          kept.emplace_back(b, e);
        break;
      case SplitBehavior::kMergedWithNext:
        if (pending && !is_match) {
          kept.emplace_back(pending->first, e);
          pending.reset();
          break;
        }
        if (pending) kept.push_back(*pending);
        pending.reset();
        if (is_match)
          pending.emplace(b, e);
        else
          kept.emplace_back(b, e);
        break;
    }
    previous_match = is_match;
  });
  if (pending) kept.push_back(*pending);
  for (const auto& [b, e] : kept)
    if (e > b) out.emplace_back(piece, b, e - b);
}

}  // namespace

void BpeTokenizer::Impl::encode_normalized(std::string_view text, std::vector<int32_t>& ids) const {
  // The pre-tokenizer's steps, each splitting every piece the previous ones made.
  std::vector<std::string> pieces{std::string(text)};
  std::vector<std::string> next;
  for (const PreTokenizerStep& step : pre_tokenizer) {
    next.clear();
    for (std::string& piece : pieces) {
      if (step.kind == PreTokenizerStep::kByteLevel && step.add_prefix_space && piece.rfind(' ', 0) != 0)
        piece.insert(0, 1, ' ');
      if (!step.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      const SplitBehavior behavior =
          step.kind == PreTokenizerStep::kByteLevel ? SplitBehavior::kIsolated : step.behavior;
      split_piece(step.regex.get(), piece, behavior, next);
    }
    pieces.swap(next);
  }
  for (const std::string& piece : pieces) encode_piece(piece, ids);
}

void BpeTokenizer::Impl::encode_segment(std::string_view raw, std::vector<int32_t>& ids) const {
  const std::string text = normalize(raw);
  if (normalized_matcher.empty()) {
    encode_normalized(text, ids);
    return;
  }
  size_t at = 0;
  while (at < text.size()) {
    const auto m = normalized_matcher.find(text, at);
    const size_t stop = m ? m->begin : text.size();
    if (stop > at) encode_normalized(std::string_view(text).substr(at, stop - at), ids);
    if (!m) break;
    ids.push_back(m->token->id);
    at = m->end;
  }
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  return parse(read_input_file(path, kTokenizerInput.named("a tokenizer.json")), path);
}

BpeTokenizer BpeTokenizer::parse(std::string_view json_text, const std::string& where) {
  Json root;
  try {
    root = parse_json_limited(json_text);
  } catch (const Json::exception& e) {
    RLCPP_FAIL(where << ": not valid JSON: " << e.what());
  }
  RLCPP_CHECK(root.is_object(), where << ": a tokenizer.json is a JSON object, got " << json_excerpt(root));
  auto impl = std::make_unique<Impl>();
  impl->where = where;
  impl->load_model(member(root, "model", where));
  impl->load_added_tokens(root.value("added_tokens", Json()));
  impl->load_normalizer(root.value("normalizer", Json()), where_of(where, "normalizer"));
  impl->load_pre_tokenizer(root.value("pre_tokenizer", Json()), where_of(where, "pre_tokenizer"));
  const bool byte_level_split =
      std::any_of(impl->pre_tokenizer.begin(), impl->pre_tokenizer.end(),
                  [](const PreTokenizerStep& s) { return s.kind == PreTokenizerStep::kByteLevel; });
  RLCPP_CHECK(byte_level_split, where_of(where, "pre_tokenizer")
                                    << " has no ByteLevel step: only byte-level BPE tokenizers are supported");
  impl->load_post_processor(root.value("post_processor", Json()), where_of(where, "post_processor"));
  const Json decoder = root.value("decoder", Json());
  if (!decoder.is_null()) {
    const std::string type = string_member(decoder, "type", where_of(where, "decoder"));
    RLCPP_CHECK(type == "ByteLevel", where_of(where, "decoder.type") << " is '" << type
                                                                     << "': only the ByteLevel decoder is supported");
  }
  return BpeTokenizer(std::move(impl));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  const size_t valid = utf8_valid_prefix(text);
  RLCPP_CHECK(valid == text.size(), "tokenizer: the text is not valid UTF-8 at byte " << valid);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  size_t at = 0;
  while (at < text.size()) {
    const auto m = impl_->raw_matcher.find(text, at);
    const size_t stop = m ? m->begin : text.size();
    if (stop > at) impl_->encode_segment(text.substr(at, stop - at), ids);
    if (!m) break;
    ids.push_back(m->token->id);
    at = m->end;
  }
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    RLCPP_CHECK(id >= 0 && id < vocab_size() && !impl_->spelling[id].empty(),
                "tokenizer: id " << id << " at index " << i << " is not a token of " << impl_->where
                                 << " (ids are in [0, " << vocab_size() << "))");
    if (skip_special && impl_->special[id]) continue;
    bytes += token_bytes(id);
  }
  return utf8_lossy(bytes);
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  RLCPP_CHECK(id >= 0 && id < vocab_size() && !impl_->spelling[id].empty(),
              "tokenizer: id " << id << " is not a token of " << impl_->where << " (ids are in [0, " << vocab_size()
                               << "))");
  const std::string& s = impl_->spelling[id];
  // The byte-level decoder maps a token whose characters are all in its alphabet to their bytes, and leaves
  // any other token (an added token such as "<|im_start|>" maps to itself either way) as it is.
  if (std::optional<std::string> b = bytes_of_spelling(s)) return *b;
  return s;
}

int32_t BpeTokenizer::vocab_size() const { return static_cast<int32_t>(impl_->spelling.size()); }

std::optional<int32_t> BpeTokenizer::token_id(std::string_view token) const {
  const auto it = impl_->id_of_spelling.find(std::string(token));
  if (it == impl_->id_of_spelling.end()) return std::nullopt;
  return it->second;
}

const std::string& BpeTokenizer::token_text(int32_t id) const {
  RLCPP_CHECK(id >= 0 && id < vocab_size(), "tokenizer: id " << id << " is outside [0, " << vocab_size() << ")");
  return impl_->spelling[id];
}

const std::vector<int32_t>& BpeTokenizer::prefix_ids() const { return impl_->prefix; }

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id];
}

}  // namespace rlcpp
