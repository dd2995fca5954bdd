#include <gtest/gtest.h>

#include "core/config.h"
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
