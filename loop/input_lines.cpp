#include "loop/input_lines.h"

#include <limits>
#include <unordered_map>

#include "core/config.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"
#include "loop/evaluation.h"
#include "rollout/request_wire.h"

namespace rlcpp {

namespace {

Json parse_line(const std::string& line, const std::string& where) {
  try {
    return parse_json_limited(line);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range (a number like 1e400)
    RLCPP_FAIL(where << ": not JSON: " << e.what());
  }
}

void check_keys(const Json& j, const std::string& where, std::initializer_list<const char*> valid) {
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    std::string list;
    for (const char* v : valid) {
      known = known || key == v;
      list += (list.empty() ? "" : ", ") + std::string(v);
    }
    RLCPP_CHECK(known, where << ": unknown key \"" << key << "\" (valid keys: " << list << ")");
  }
}

// "tokens": a non-empty list of integer ids in [0, limit).
std::vector<int32_t> token_ids(const Json& t, const std::string& where, int64_t limit) {
  RLCPP_CHECK(t.is_array() && !t.empty(), where << ": \"tokens\" must be a non-empty list of integer ids");
  std::vector<int32_t> ids;
  for (const Json& id : t) {
    RLCPP_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < limit,
                where << ": token " << json_excerpt(id) << " is not an integer id in [0, " << limit << ")");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

}  // namespace

PromptLine parse_prompt_line(const std::string& line, const std::string& where, const Tokenizer& tok,
                             uint64_t default_id) {
  const Json j = parse_line(line, where);
  RLCPP_CHECK(j.is_object(), where << ": expected an object like {\"prompt\": \"12+34=\"}");
  check_keys(j, where, {"prompt", "messages", "tokens", "id"});
  RLCPP_CHECK(j.contains("prompt") + j.contains("messages") + j.contains("tokens") <= 1,
              where << ": gives more than one of \"prompt\", \"messages\" and \"tokens\"; give one");
  PromptLine p;
  p.id = default_id;
  p.where = where;
  if (auto it = j.find("prompt"); it != j.end()) {
    RLCPP_CHECK(it->is_string(), where << ": \"prompt\" must be a string");
    p.text = it->get<std::string>();
    try {
      p.tokens = encode_prompt(tok, p.text);
    } catch (const Error& e) {
      RLCPP_FAIL(where << ": " << e.what());
    }
  } else if (auto m = j.find("messages"); m != j.end()) {
    try {
      p.tokens = tok.encode_prompt("", *m);
    } catch (const Error& e) {
      RLCPP_FAIL(where << ": " << e.what());
    }
    const Json& last = m->back();  // encode_prompt checked the shape: the user turn the model answers
    p.text = last["content"].get<std::string>();
  } else if (auto t = j.find("tokens"); t != j.end()) {
    p.tokens = token_ids(*t, where, std::numeric_limits<int32_t>::max());  // the engine checks the vocabulary
  } else {
    RLCPP_FAIL(where << ": needs \"prompt\" (text), \"messages\" (a conversation) or \"tokens\" (ids)");
  }
  if (auto it = j.find("id"); it != j.end()) {
    RLCPP_CHECK(it->is_number_unsigned(), where << ": \"id\" must be a non-negative integer, got " << json_excerpt(*it));
    p.id = it->get<uint64_t>();
  }
  return p;
}

std::vector<PromptLine> read_prompt_lines(const std::string& path, const Tokenizer& tok) {
  const InputFile in(path, kDatasetInput.named("a JSONL file of prompts"));
  const RequestLimits limits;
  std::vector<PromptLine> out;
  std::unordered_map<uint64_t, std::string> line_of_id;
  in.for_each_line([&](std::string_view text, int64_t number) {
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    const std::string line(text);
    const std::string where = path + ":" + std::to_string(number);
    RLCPP_CHECK(static_cast<int64_t>(out.size()) < limits.max_prompts,
                where << ": more than " << limits.max_prompts << " prompts in one generate");
    PromptLine p = parse_prompt_line(line, where, tok, out.size());
    // The id keys a prompt's random draws: two prompts with one id would get the same samples.
    const auto [first, fresh] = line_of_id.emplace(p.id, where);
    RLCPP_CHECK(fresh, where << ": prompt id " << p.id << " is already used by " << first->second
                             << " (ids key the sampling draws, so they must differ)");
    out.push_back(std::move(p));
  });
  RLCPP_CHECK(!out.empty(), "prompts file '" << path << "' has no prompts");
  return out;
}

std::vector<int32_t> parse_score_line(const std::string& line, const std::string& where, const Tokenizer& tok,
                                      int64_t vocab) {
  const Json j = parse_line(line, where);
  RLCPP_CHECK(j.is_object(), where << ": expected an object with \"text\" or \"tokens\"");
  check_keys(j, where, {"text", "eos", "tokens"});
  RLCPP_CHECK(!(j.contains("text") && j.contains("tokens")), where << ": gives both \"text\" and \"tokens\"; give one");
  RLCPP_CHECK(!j.contains("eos") || j["eos"].is_boolean(),
              where << ": \"eos\" must be true or false, got " << json_excerpt(j["eos"]));
  RLCPP_CHECK(!j.contains("eos") || j.contains("text"),
              where << ": \"eos\" goes with \"text\" (token ids are scored as given)");
  std::vector<int32_t> ids;
  if (j.contains("text")) {
    RLCPP_CHECK(j["text"].is_string(), where << ": \"text\" must be a string");
    try {
      ids = encode_prompt(tok, j["text"].get<std::string>());
    } catch (const Error& e) {
      RLCPP_FAIL(where << ": " << e.what());
    }
    if (j.value("eos", false)) ids.push_back(tok.eos_id());
  } else if (j.contains("tokens")) {
    ids = token_ids(j["tokens"], where, vocab);
  } else {
    RLCPP_FAIL(where << ": expected \"text\" or \"tokens\"");
  }
  RLCPP_CHECK(ids.size() >= 2, where << ": needs at least two tokens to score one");
  return ids;
}

}  // namespace rlcpp
