#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "core/json_input.h"
#include "core/philox.h"

namespace rlcpp {
namespace {

struct InnerConfig {
  double lr = 1e-3;
  std::vector<int64_t> sizes = {1, 2};
  template <class V> void visit(V& v) {
    v("lr", lr, "learning rate");
    v("sizes", sizes, "sizes");
  }
};

struct OuterConfig {
  int64_t steps = 10;
  std::string name = "x";
  bool flag = false;
  InnerConfig optim;
  template <class V> void visit(V& v) {
    v("steps", steps, "steps");
    v("name", name, "name");
    v("flag", flag, "flag");
    v("optim", optim, "optimizer");
  }
};

std::string error_of(const Json& j) {
  OuterConfig c;
  try {
    config_from_json(j, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ReadsNestedValuesAndKeepsDefaults) {
  OuterConfig c;
  config_from_json(Json::parse(R"({"steps": 5, "optim": {"lr": 0.5}})"), c);
  EXPECT_EQ(c.steps, 5);
  EXPECT_EQ(c.optim.lr, 0.5);
  EXPECT_EQ(c.name, "x");
  EXPECT_EQ(c.optim.sizes.size(), 2u);
}

TEST(Config, UnknownKeyNamesItsPath) {
  EXPECT_NE(error_of(Json::parse(R"({"optim": {"lrr": 1}})")).find("'optim.lrr'"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"stepz": 1})")).find("'stepz'"), std::string::npos);
}

TEST(Config, WrongTypeNamesItsPath) {
  std::string e = error_of(Json::parse(R"({"optim": {"lr": "fast"}})"));
  EXPECT_NE(e.find("'optim.lr'"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a number"), std::string::npos) << e;
  EXPECT_NE(error_of(Json::parse(R"({"steps": 1.5})")).find("'steps': expected an integer"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"optim": {"sizes": [1, "a"]}})")).find("'optim.sizes[1]'"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"optim": 3})")).find("'optim': expected an object"), std::string::npos);
}

// Found by fuzz_config (tests/fuzz): an override whose value is not UTF-8 was kept as a string, and the type
// error's message dumped it, which threw a JSON type_error past every handler (std::terminate).
TEST(Config, OverrideThatIsNotUtf8IsAnErrorNotACrash) {
  Json j = Json::object();
  try {
    apply_override(j, "optim.lr=1e-3\xff");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not UTF-8 text"), std::string::npos) << e.what();
  }
  // A value that is not UTF-8 by any other road still gets its type error, with the byte replaced.
  Json bad = Json::object();
  bad["steps"] = std::string("5\xff");
  EXPECT_NE(error_of(bad).find("'steps': expected an integer, got \"5\xef\xbf\xbd\""), std::string::npos) << error_of(bad);
}

// Found by fuzz_config: a number past double's range is nlohmann's out_of_range, not a parse_error, and
// escaped load_json_file's handler without the file's name.
TEST(Config, NumberOutOfRangeInAFileNamesTheFile) {
  const std::string path = (std::filesystem::temp_directory_path() / "rlcpp_config_overflow.json").string();
  std::ofstream(path) << R"({"steps": 9900000006001e44677044370955161})";
  try {
    load_json_file(path);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("invalid JSON in '" + path + "'"), std::string::npos) << e.what();
  }
  Json j = Json::object();
  apply_override(j, "steps=1e400");  // taken as text, so the type check names the key
  EXPECT_NE(error_of(j).find("'steps': expected an integer"), std::string::npos);
}

TEST(Config, OverrideSetsNestedKeysAndParsesValues) {
  Json j = Json::parse(R"({"optim": {"lr": 1}})");
  apply_override(j, "optim.lr=0.25");
  apply_override(j, "name=hello");
  apply_override(j, "flag=true");
  OuterConfig c;
  config_from_json(j, c);
  EXPECT_EQ(c.optim.lr, 0.25);
  EXPECT_EQ(c.name, "hello");
  EXPECT_TRUE(c.flag);
  Json bad = Json::object();
  apply_override(bad, "optim.nope=1");
  EXPECT_NE(error_of(bad).find("'optim.nope'"), std::string::npos);
  EXPECT_THROW(apply_override(bad, "=1"), Error);
}

std::string nested_arrays(int64_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string parse_error_of(const std::string& text) {
  try {
    parse_json_limited(text);
  } catch (const Json::parse_error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonInput, DepthLimitCountsBracketsOutsideStrings) {
  EXPECT_EQ(parse_json_limited(nested_arrays(kMaxJsonDepth)).dump(), nested_arrays(kMaxJsonDepth));
  const std::string err = parse_error_of(nested_arrays(kMaxJsonDepth + 1));
  EXPECT_NE(err.find("parse error at byte 129: nesting deeper than the limit of 128 levels"), std::string::npos)
      << err;
  // Objects count as arrays do.
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_NE(parse_error_of(objects).find("nesting deeper"), std::string::npos);
  // Brackets in strings are text; an escaped quote does not end a string, an escaped backslash does not escape
  // the quote after it.
  EXPECT_EQ(parse_json_limited(R"({"s": "\")" + std::string(1000, '[') + R"("})")["s"].get<std::string>().size(),
            1001u);
  EXPECT_NE(parse_error_of(R"(["\\", )" + nested_arrays(kMaxJsonDepth) + "]").find("nesting deeper"),
            std::string::npos);
  // Without exceptions, too deep is discarded like any other malformed input.
  EXPECT_TRUE(parse_json_limited(nested_arrays(1000000), /*allow_exceptions=*/false).is_discarded());
  EXPECT_TRUE(parse_json_limited("{not json", /*allow_exceptions=*/false).is_discarded());
  EXPECT_EQ(parse_json_limited(R"({"a": [1, {"b": 2}]})")["a"][1]["b"], 2);
}

// Json::parse keeps the last of two equal keys; outside input with one is refused, at any depth.
TEST(JsonInput, DuplicateKeysAreRefused) {
  auto error_of_parse = [](const std::string& text) -> std::string {
    try {
      parse_json_limited(text);
    } catch (const Json::exception& e) {
      return e.what();
    }
    return "<no error>";
  };
  EXPECT_NE(error_of_parse(R"({"lr": 1, "lr": 2})").find("duplicate key \"lr\""), std::string::npos);
  EXPECT_NE(error_of_parse(R"({"optim": {"a": [{"x": 1, "x": 1}]}})").find("duplicate key \"x\""), std::string::npos);
  EXPECT_TRUE(parse_json_limited(R"({"a": 1, "a": 2})", /*allow_exceptions=*/false).is_discarded());
  // The same key in different objects is fine.
  EXPECT_EQ(parse_json_limited(R"({"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]})")["b"][1]["a"], 3);
}

// A config file nested 10^6 deep used to parse and then overflow the stack in the first copy or dump.
TEST(Config, DeeplyNestedFileIsAnErrorNamingTheDepthLimit) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rlcpp_deep_config_" + std::to_string(getpid()) + ".json")).string();
  std::ofstream(path) << R"({"optim": )" << nested_arrays(1000000) << "}";
  std::string err;
  try {
    OuterConfig c;
    config_from_json(load_json_file(path), c);
  } catch (const Error& e) {
    err = e.what();
  }
  std::filesystem::remove(path);
  EXPECT_NE(err.find("invalid JSON in '" + path + "'"), std::string::npos) << err.substr(0, 300);
  EXPECT_NE(err.find("nesting deeper than the limit of 128 levels"), std::string::npos) << err.substr(0, 300);
}

// An override value too deep to parse is taken as text, as any value that is not JSON is; the key's type
// check then names it.
TEST(Config, DeeplyNestedOverrideIsTextNotACrash) {
  Json j = Json::object();
  apply_override(j, "optim.lr=" + nested_arrays(1000000));
  ASSERT_TRUE(j["optim"]["lr"].is_string());
  EXPECT_NE(error_of(j).find("'optim.lr': expected a number"), std::string::npos);
}

TEST(Config, RoundTripsThroughJsonAndDocumentsEveryKey) {
  OuterConfig c;
  c.steps = 7;
  c.optim.sizes = {3};
  OuterConfig d;
  config_from_json(config_to_json(c), d);
  EXPECT_EQ(d.steps, 7);
  EXPECT_EQ(d.optim.sizes, std::vector<int64_t>{3});
  auto doc = config_doc(c);
  bool has_lr = false;
  for (auto& line : doc) has_lr = has_lr || line.rfind("optim.lr (number", 0) == 0;
  EXPECT_TRUE(has_lr);
}

TEST(Philox, StreamIsReproducibleAndRestorable) {
  PhiloxStream a(42, 7), b(42, 7), c(43, 7);
  std::vector<uint32_t> xs;
  for (int i = 0; i < 10; ++i) xs.push_back(a.next_u32());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(xs[i], b.next_u32());
  EXPECT_NE(xs[0], c.next_u32());
  PhiloxStream d(42, 7);
  for (int i = 0; i < 5; ++i) d.next_u32();
  PhiloxStream e(42, 7);
  e.restore(d.index(), d.buffered());
  for (int i = 5; i < 10; ++i) EXPECT_EQ(xs[i], e.next_u32());
}

TEST(Philox, UniformAndBelowAreInRange) {
  PhiloxStream s(1, 2);
  double sum = 0;
  for (int i = 0; i < 20000; ++i) {
    float u = s.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    ASSERT_LT(s.below(7), 7u);
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);
}

}  // namespace
}  // namespace rlcpp
