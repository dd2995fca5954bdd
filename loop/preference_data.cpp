#include "loop/preference_data.h"

#include <cstdio>

#include "core/config.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"

namespace rlcpp {

namespace {

std::string field_of(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  RLCPP_CHECK(it != j.end(), where << ": missing field '" << key << "' (each line needs \"prompt\", \"chosen\" "
                                   << "and \"rejected\" strings)");
  RLCPP_CHECK(it->is_string(), where << ": field '" << key << "' must be a string, got " << it->dump());
  return it->get<std::string>();
}

std::vector<int32_t> encode_field(const Tokenizer& tok, const std::string& text, const char* field,
                                  const std::string& where) {
  try {
    return tok.encode(text);
  } catch (const Error& e) {
    RLCPP_FAIL(where << ": field '" << field << "': " << e.what());
  }
}

}  // namespace

std::vector<PreferenceRecord> read_preference_jsonl(const std::string& path) {
  const InputFile in(path, kDatasetInput.named("a JSONL file of preference pairs"));
  std::vector<PreferenceRecord> out;
  in.for_each_line([&](std::string_view text, int64_t line) {
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    const std::string where = path + ":" + std::to_string(line);
    Json j;
    try {
      j = parse_json_limited(text);
    } catch (const Json::exception& e) {  // parse_error, or out_of_range (a number like 1e400)
      RLCPP_FAIL(where << ": invalid JSON (" << e.what() << ")");
    }
    RLCPP_CHECK(j.is_object(), where << ": expected a JSON object {\"prompt\", \"chosen\", \"rejected\"}, got "
                                     << j.dump());
    PreferenceRecord r{field_of(j, "prompt", where), field_of(j, "chosen", where), field_of(j, "rejected", where),
                       line};
    RLCPP_CHECK(r.chosen != r.rejected, where << ": 'chosen' and 'rejected' are the same (\"" << r.chosen
                                              << "\"), a pair without a preference");
    out.push_back(std::move(r));
  });
  RLCPP_CHECK(!out.empty(), path << ": no preference pairs (expected one JSON object per line)");
  return out;
}

std::vector<PreferencePair> encode_preferences(const std::vector<PreferenceRecord>& records,
                                               const Tokenizer& tokenizer, int64_t max_positions,
                                               const std::string& path) {
  std::vector<PreferencePair> out;
  for (const PreferenceRecord& r : records) {
    const std::string where = path + ":" + std::to_string(r.line);
    PreferencePair p;
    if (const std::optional<int32_t> bos = tokenizer.bos_id()) p.prompt.push_back(*bos);
    for (int32_t id : encode_field(tokenizer, r.prompt, "prompt", where)) p.prompt.push_back(id);
    p.chosen = encode_field(tokenizer, r.chosen, "chosen", where);
    p.chosen.push_back(tokenizer.eos_id());
    p.rejected = encode_field(tokenizer, r.rejected, "rejected", where);
    p.rejected.push_back(tokenizer.eos_id());
    const size_t longest = p.prompt.size() + std::max(p.chosen.size(), p.rejected.size());
    RLCPP_CHECK(static_cast<int64_t>(longest) <= max_positions,
                where << ": BOS + prompt + completion + EOS is " << longest
                      << " tokens, longer than the model's context of " << max_positions);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace rlcpp
