#include "core/config.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace rlcpp {

Json load_json_file(const std::string& path) {
  std::ifstream in(path);
  RLCPP_CHECK(in.good(), "cannot open JSON file '" << path << "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return Json::parse(ss.str());
  } catch (const Json::parse_error& e) {
    RLCPP_FAIL("invalid JSON in '" << path << "': " << e.what());
  }
}

void apply_override(Json& j, const std::string& assignment) {
  auto eq = assignment.find('=');
  RLCPP_CHECK(eq != std::string::npos && eq > 0,
              "override '" << assignment << "' is not of the form key.path=value");
  std::string path = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  Json value;
  try {
    value = Json::parse(text);
  } catch (const Json::parse_error&) {
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
  {
    std::ofstream out(tmp);
    RLCPP_CHECK(out.good(), "cannot write '" << tmp << "'");
    out << j.dump(2) << "\n";
    RLCPP_CHECK(out.good(), "write to '" << tmp << "' failed");
  }
  RLCPP_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '" << tmp << "' to '" << path << "'");
}

}  // namespace rlcpp
