#include "core/json_input.h"

#include "core/error.h"

#include <set>
#include <string>
#include <vector>

namespace rlcpp {

namespace {

// Offset of the first '[' or '{' that opens level kMaxJsonDepth + 1, or npos. Brackets inside strings do not
// count; there a backslash escapes the next character, so `"\""` does not end the string early. Malformed
// input (unbalanced brackets, an unterminated string) is left for the parser to name.
size_t too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

Json parse_json_limited(std::string_view text, bool allow_exceptions) {
  const size_t deep = too_deep_at(text);
  if (deep != std::string_view::npos) {
    if (!allow_exceptions) return Json(Json::value_t::discarded);
    // Byte offsets count from 1, as the parser's own errors do.
    throw Json::parse_error::create(
        101, deep + 1, "nesting deeper than the limit of " + std::to_string(kMaxJsonDepth) + " levels", nullptr);
  }
  std::vector<std::set<std::string>> open_objects;  // the keys seen so far in each object being parsed
  const Json::parser_callback_t no_duplicates = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == Json::parse_event_t::key && !open_objects.back().insert(parsed.get<std::string>()).second) {
      throw Json::other_error::create(501, "duplicate key \"" + parsed.get<std::string>() + "\"", nullptr);
    }
    return true;
  };
  if (!allow_exceptions) {
    try {
      return Json::parse(text, no_duplicates, true);
    } catch (const Json::exception&) {
      return Json(Json::value_t::discarded);
    }
  }
  return Json::parse(text, no_duplicates, true);
}

const Json& json_field(const Json& j, const char* key, const std::string& where) {
  RLCPP_CHECK(j.is_object() && j.contains(key), where << ": missing key '" << key << "'");
  return j[key];
}

}  // namespace rlcpp
