// Parsing JSON that comes from outside the process: files, dataset and record lines, wire headers, server
// replies, safetensors headers, command-line overrides. nlohmann's parser itself is iterative, but copying,
// dumping and comparing a value recurse once per nesting level, so a line of 10^6 '[' parses and then
// overflows the stack wherever it is first copied. Input nested deeper than kMaxJsonDepth is therefore
// refused before any value is built.
#pragma once

#include <string>
#include <string_view>

#include "core/config.h"
#include "core/error.h"

namespace rlcpp {

// Arrays and objects inside one another, counting the outermost: `{"a": [1]}` is 2 deep. Far above any
// config, record or header of ours; a few hundred levels of recursion use a small part of a thread's stack.
inline constexpr int kMaxJsonDepth = 128;

// Json::parse(text) with the depth limit. Deeper input throws Json::parse_error, like any other malformed input,
// whose message says "nesting deeper than the limit of 128 levels" and gives the byte offset of the bracket
// that went one level too deep. A key given twice in one object (which Json::parse resolves silently by
// keeping the last) throws Json::other_error "duplicate key \"K\"": a config with two "lr" or a safetensors
// header with two tensors of one name is an error, not a choice. With allow_exceptions = false every failure
// instead returns a discarded value (is_discarded()), as Json::parse(text, nullptr, false) does.
Json parse_json_limited(std::string_view text, bool allow_exceptions = true);

// The value of `key` in the object `j` (a saved record); a missing key throws naming `where` and the key.
const Json& json_field(const Json& j, const char* key, const std::string& where);
// That value as a T; a wrong type throws naming `where`, the key and what the JSON library said.
template <class T> T json_get(const Json& j, const char* key, const std::string& where) {
  try {
    return json_field(j, key, where).get<T>();
  } catch (const Json::exception& e) {
    throw Error(where + ": key '" + key + "' has the wrong type (" + e.what() + ")");
  }
}

}  // namespace rlcpp
