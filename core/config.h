// Config loading: each config struct lists its keys once, in a visit() method, with default and doc:
//
//   struct OptimConfig {
//     float lr = 1e-3f;
//     template <class V> void visit(V& v) { v("lr", lr, "AdamW learning rate"); }
//   };
//
// From that one list come loading from JSON (unknown keys and wrong types are errors naming the key path),
// writing the resolved config back, and the documentation `rlcpp config --doc` prints.
#pragma once

#include <nlohmann/json.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"

namespace rlcpp {

using Json = nlohmann::json;

// A value for an error message: at most `max_chars` of its JSON, any byte that is not UTF-8 shown as U+FFFD (a
// plain dump() throws on those, and the message would be lost to a type_error).
inline std::string json_excerpt(const Json& j, size_t max_chars = 120) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

namespace config_detail {

template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};

template <class T> constexpr bool is_leaf() {
  return std::is_arithmetic_v<T> || std::is_same_v<T, std::string> || is_vector<T>::value;
}

inline std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

template <class T> const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  else if constexpr (std::is_integral_v<T>) return "integer";
  else if constexpr (std::is_floating_point_v<T>) return "number";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else return "array";
}

// Reads a leaf value, throwing with the key path on a type mismatch.
template <class T> T read_leaf(const Json& j, const std::string& path) {
  if constexpr (std::is_same_v<T, bool>) {
    RLCPP_CHECK(j.is_boolean(), "config key '" << path << "': expected a boolean, got " << json_excerpt(j));
    return j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    RLCPP_CHECK(j.is_number_integer(), "config key '" << path << "': expected an integer, got " << json_excerpt(j));
    // Checked before converting, so that an error shows the number as written, not what it wrapped to.
    using Limits = std::numeric_limits<T>;
    bool fits = false;
    if (j.is_number_unsigned()) {
      fits = j.get<uint64_t>() <= static_cast<uint64_t>(Limits::max());
    } else {
      const int64_t v = j.get<int64_t>();
      fits = v < 0 ? !std::is_unsigned_v<T> && v >= static_cast<int64_t>(Limits::min())
                   : static_cast<uint64_t>(v) <= static_cast<uint64_t>(Limits::max());
    }
    RLCPP_CHECK(fits, "config key '" << path << "': " << json_excerpt(j) << " is outside the range of this key's "
                                     << (std::is_unsigned_v<T> ? "unsigned " : "") << 8 * sizeof(T)
                                     << "-bit integers");
    return j.get<T>();
  } else if constexpr (std::is_floating_point_v<T>) {
    RLCPP_CHECK(j.is_number(), "config key '" << path << "': expected a number, got " << json_excerpt(j));
    // A float key: a number a float cannot hold would reach the checks as inf or 0; name it as written.
    const double value = j.get<double>();
    const T stored = static_cast<T>(value);
    RLCPP_CHECK(!std::isinf(stored) && (stored != 0 || value == 0),
                "config key '" << path << "': " << json_excerpt(j) << " is outside the range of a "
                               << 8 * sizeof(T) << "-bit float (it would be stored as " << stored << ")");
    return stored;
  } else if constexpr (std::is_same_v<T, std::string>) {
    RLCPP_CHECK(j.is_string(), "config key '" << path << "': expected a string, got " << json_excerpt(j));
    return j.get<std::string>();
  } else {
    RLCPP_CHECK(j.is_array(), "config key '" << path << "': expected an array, got " << json_excerpt(j));
    T out;
    for (size_t i = 0; i < j.size(); ++i)
      out.push_back(read_leaf<typename T::value_type>(j[i], path + "[" + std::to_string(i) + "]"));
    return out;
  }
}

class Reader {
 public:
  Reader(const Json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {
    RLCPP_CHECK(j_.is_object(), "config key '" << (prefix_.empty() ? "<root>" : prefix_)
                                               << "': expected an object, got " << json_excerpt(j_));
  }
  template <class T> void operator()(const char* key, T& field, const char* /*doc*/) {
    seen_.push_back(key);
    auto it = j_.find(key);
    if (it == j_.end()) return;
    std::string path = join(prefix_, key);
    if constexpr (is_leaf<T>()) {
      field = read_leaf<T>(*it, path);
    } else {
      Reader sub(*it, path);
      field.visit(sub);
      sub.check_no_unknown();
    }
  }
  void check_no_unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool known = false;
      for (const auto& k : seen_) known = known || k == it.key();
      if (!known) {
        std::string valid;
        for (const auto& k : seen_) valid += (valid.empty() ? "" : ", ") + k;
        RLCPP_FAIL("unknown config key '" << join(prefix_, it.key()) << "' (valid keys here: " << valid << ")");
      }
    }
  }

 private:
  const Json& j_;
  std::string prefix_;
  std::vector<std::string> seen_;
};

class Writer {
 public:
  explicit Writer(Json& j) : j_(j) { j_ = Json::object(); }
  template <class T> void operator()(const char* key, T& field, const char*) {
    if constexpr (is_leaf<T>()) {
      j_[key] = field;
    } else {
      Writer sub(j_[key]);
      field.visit(sub);
    }
  }

 private:
  Json& j_;
};

class Documenter {
 public:
  Documenter(std::vector<std::string>& lines, std::string prefix) : lines_(lines), prefix_(std::move(prefix)) {}
  template <class T> void operator()(const char* key, T& field, const char* doc) {
    std::string path = join(prefix_, key);
    if constexpr (is_leaf<T>()) {
      lines_.push_back(path + " (" + type_name<T>() + ", default " + Json(field).dump() + "): " + doc);
    } else {
      if (doc && *doc) lines_.push_back(path + ": " + doc);
      Documenter sub(lines_, path);
      field.visit(sub);
    }
  }

 private:
  std::vector<std::string>& lines_;
  std::string prefix_;
};

}  // namespace config_detail

// Fills `cfg` from `j`; keys absent from `j` keep their defaults.
template <class C> void config_from_json(const Json& j, C& cfg) {
  config_detail::Reader r(j, "");
  cfg.visit(r);
  r.check_no_unknown();
}

template <class C> Json config_to_json(const C& cfg) {
  Json j;
  config_detail::Writer w(j);
  const_cast<C&>(cfg).visit(w);
  return j;
}

template <class C> std::vector<std::string> config_doc(const C& cfg) {
  std::vector<std::string> lines;
  config_detail::Documenter d(lines, "");
  const_cast<C&>(cfg).visit(d);
  return lines;
}

// Reads a JSON file (an InputFile of `kind`: a regular file within its size limit); the error names the file
// and the parse position.
Json load_json_file(const std::string& path, const InputKind& kind = kConfigInput);

// Applies "a.b.c=value" to `j`. The value is parsed as JSON when it parses (numbers, true, [1,2]),
// otherwise taken as a string. Unknown keys are caught later by config_from_json.
void apply_override(Json& j, const std::string& assignment);

// Writes `j` to `path` via a temporary file and rename, so a crash never leaves half a file.
void write_json_file_atomic(const std::string& path, const Json& j);

// The keys whose values differ between two configs, as "a.b: before -> after" (objects compared key by key,
// anything else as a whole; a key only one side has shows "(absent)"), in key order.
std::vector<std::string> config_differences(const Json& before, const Json& after);

}  // namespace rlcpp
