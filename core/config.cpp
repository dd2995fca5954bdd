#include "core/config.h"

#include <cstdio>
#include <set>

#include "core/json_input.h"
#include "core/output_file.h"

namespace rlcpp {

Json load_json_file(const std::string& path, const InputKind& kind) {
  const std::string text = read_input_file(path, kind);
  try {
    return parse_json_limited(text);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    RLCPP_FAIL("invalid JSON in '" << path << "': " << e.what());
  }
}

void apply_override(Json& j, const std::string& assignment) {
  auto eq = assignment.find('=');
  RLCPP_CHECK(eq != std::string::npos && eq > 0,
              "override '" << assignment << "' is not of the form key.path=value");
  try {
    (void)Json(assignment).dump();  // the config is JSON, whose text is UTF-8
  } catch (const Json::type_error& e) {
    RLCPP_FAIL("override '" << Json(assignment).dump(-1, ' ', false, Json::error_handler_t::replace)
                            << "' is not UTF-8 text: " << e.what());
  }
  std::string path = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  Json value;
  try {
    value = parse_json_limited(text);
  } catch (const Json::exception&) {  // not JSON (or a number past double): the text itself
    value = text;
  }
  Json* node = &j;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    RLCPP_CHECK(!key.empty(), "override '" << assignment << "' has an empty key segment");
    if (!node->is_object()) *node = Json::object();
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    start = dot + 1;
  }
}

void write_json_file_atomic(const std::string& path, const Json& j) {
  std::string tmp = path + ".tmp";
  OutputFile out(tmp, OutputFile::Mode::kReplace);  // removed again should a write fail
  out.write(j.dump(2) + "\n");
  out.close();
  RLCPP_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '" << tmp << "' to '" << path << "'");
}

namespace {

void collect_differences(const Json* before, const Json* after, const std::string& path,
                         std::vector<std::string>& out) {
  if (before && after && before->is_object() && after->is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : before->items()) keys.insert(k);
    for (const auto& [k, v] : after->items()) keys.insert(k);
    for (const std::string& k : keys) {
      const auto b = before->find(k), a = after->find(k);
      collect_differences(b == before->end() ? nullptr : &*b, a == after->end() ? nullptr : &*a,
                          path.empty() ? k : path + "." + k, out);
    }
    return;
  }
  if (before && after && *before == *after) return;
  out.push_back(path + ": " + (before ? before->dump() : "(absent)") + " -> " + (after ? after->dump() : "(absent)"));
}

}  // namespace

std::vector<std::string> config_differences(const Json& before, const Json& after) {
  std::vector<std::string> out;
  collect_differences(&before, &after, "", out);
  return out;
}

}  // namespace rlcpp
