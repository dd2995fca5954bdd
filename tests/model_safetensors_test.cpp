#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/philox.h"
#include "model/safetensors.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "rlcpp_safetensors_XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file of [8-byte little-endian header length][header][buffer], bytes exactly as given.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& buffer,
                        uint64_t header_len_override = UINT64_MAX) {
    uint64_t n = header_len_override == UINT64_MAX ? header.size() : header_len_override;
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return write_bytes(name, bytes + header + buffer);
  }
  std::string write_bytes(const std::string& name, const std::string& bytes) {
    std::string p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  fs::path dir_;
};

std::string read_error(const std::string& p) {
  return error_of([&] { read_safetensors(p); });
}

std::string floats_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

// Expects read_safetensors(p) to fail with a message naming the file, the tensor (when given) and `what`.
void expect_rejected(const std::string& p, const std::string& tensor, const std::string& what) {
  std::string e = read_error(p);
  EXPECT_NE(e.find(p), std::string::npos) << e;
  if (!tensor.empty()) EXPECT_NE(e.find("'" + tensor + "'"), std::string::npos) << e;
  EXPECT_NE(e.find(what), std::string::npos) << e;
}

Tensor random_tensor(Shape shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  PhiloxStream rng(seed, 0);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng.next_u32());
  return t;
}

TEST_F(SafetensorsTest, RoundTripKeepsEveryDtypeShapeAndByte) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", random_tensor({3, 5}, DType::kF32, 1)},   {"f16", random_tensor({7}, DType::kF16, 2)},
      {"bf16", random_tensor({2, 3, 1}, DType::kBF16, 3)}, {"i32", random_tensor({4}, DType::kI32, 4)},
      {"i64", random_tensor({1, 3}, DType::kI64, 5)},   {"u8", random_tensor({13}, DType::kU8, 6)},
      {"scalar", random_tensor({}, DType::kF32, 7)},    {"empty", random_tensor({0, 4}, DType::kF32, 8)},
  };
  std::string p = path("x.safetensors");
  write_safetensors(p, tensors, {{"format", "pt"}, {"step", "12"}});
  SafetensorsFile f = read_safetensors(p);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"step", "12"}}));
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(f.tensors.count(name)) << name;
    const Tensor& r = f.tensors.at(name);
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    EXPECT_EQ(r.shape(), t.shape()) << name;
    ASSERT_EQ(r.nbytes(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0) << name;
  }
  EXPECT_FALSE(fs::exists(p + ".tmp." + std::to_string(::getpid())));
}

TEST_F(SafetensorsTest, WriterPadsHeaderToEightBytesAndPacksBufferInOrder) {
  std::string p = path("x.safetensors");
  write_safetensors(p, {{"b", random_tensor({3}, DType::kU8, 1)}, {"a", random_tensor({2}, DType::kF32, 2)}});
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ(bytes.size(), 8 + n + 3 + 8);
  Json header = Json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["b"]["data_offsets"], Json::parse("[0, 3]"));
  EXPECT_EQ(header["a"]["data_offsets"], Json::parse("[3, 11]"));
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_FALSE(header.contains("__metadata__"));
}

TEST_F(SafetensorsTest, ReadsHandWrittenFileWithOutOfOrderOffsets) {
  std::string header = R"({"__metadata__": {"format": "pt"},
    "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]},
    "v": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  std::string p = write_raw("h.safetensors", header, floats_bytes({-1.5f, 2.0f, 1.0f, 2.0f, 3.0f, 4.0f}));
  SafetensorsFile f = read_safetensors(p);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  const Tensor& w = f.tensors.at("w");
  EXPECT_EQ(w.shape(), (Shape{2, 2}));
  EXPECT_EQ(w.data<float>()[0], 1.0f);
  EXPECT_EQ(w.data<float>()[3], 4.0f);
  EXPECT_EQ(f.tensors.at("v").data<float>()[0], -1.5f);
}

TEST_F(SafetensorsTest, RejectsFileShorterThanHeaderLength) {
  expect_rejected(write_bytes("short.safetensors", "abc"), "", "shorter than the 8-byte");
  expect_rejected(write_bytes("empty.safetensors", ""), "", "shorter than the 8-byte");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthPastEndOfFile) {
  expect_rejected(write_raw("p.safetensors", "{}", "", 1000), "", "past the end of the 10-byte file");
}

TEST_F(SafetensorsTest, RejectsAbsurdHeaderLengthWithoutAllocating) {
  expect_rejected(write_raw("a.safetensors", "{}", "", uint64_t(1) << 62), "", "exceeds the 100000000-byte limit");
  expect_rejected(write_raw("b.safetensors", "{}", "", UINT64_MAX - 1), "", "exceeds");
}

TEST_F(SafetensorsTest, RejectsHeaderThatIsNotJson) {
  expect_rejected(write_raw("j.safetensors", "{\"w\": {\"dtype\": ", ""), "", "not valid JSON");
}

// Under the header size limit but nested 10^6 deep: refused before parsing, where it used to overflow the
// stack when an error message dumped it.
TEST_F(SafetensorsTest, RejectsHeaderNestedDeeperThanTheLimit) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  expect_rejected(write_raw("deep.safetensors", R"({"__metadata__": )" + deep + "}", ""), "",
                  "nesting deeper than the limit of 128 levels");
}

TEST_F(SafetensorsTest, RejectsHeaderThatIsNotAnObject) {
  expect_rejected(write_raw("j.safetensors", "[1, 2]", ""), "", "expected a JSON object");
}

TEST_F(SafetensorsTest, RejectsEntryMissingAField) {
  const std::map<std::string, std::string> without = {
      {"dtype", R"({"w": {"shape": [2], "data_offsets": [0, 8]}})"},
      {"shape", R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})"},
      {"data_offsets", R"({"w": {"dtype": "F32", "shape": [2]}})"},
  };
  for (const auto& [field, header] : without)
    expect_rejected(write_raw("m_" + field + ".safetensors", header, floats_bytes({1, 2})), "w",
                    "has no '" + field + "'");
  expect_rejected(write_raw("n.safetensors", R"({"w": 7})", ""), "w", "expected an object");
}

TEST_F(SafetensorsTest, RejectsFieldsOfTheWrongType) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"w": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}})", "dtype is 5"},
      {R"({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}})", "shape is \"2\""},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", "data_offsets is [0]"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, "8"]}})", "data_offsets is [0,\"8\"]"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 8]}})", "data_offsets is [-8,8]"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": 0}})", "data_offsets is 0"},
  };
  int i = 0;
  for (const auto& [header, what] : cases)
    expect_rejected(write_raw("t" + std::to_string(i++) + ".safetensors", header, floats_bytes({1, 2})), "w", what);
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  for (std::string dtype : {"F64", "BOOL", "f32", "Q4"}) {
    std::string header = R"({"w": {"dtype": ")" + dtype + R"(", "shape": [1], "data_offsets": [0, 8]}})";
    expect_rejected(write_raw(dtype + ".safetensors", header, floats_bytes({1, 2})), "w",
                    "dtype '" + dtype + "' is not supported");
  }
}

TEST_F(SafetensorsTest, RejectsNegativeOrNonIntegerShape) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[-1, 2]", "dimension -1"}, {"[1.5]", "dimension 1.5"}, {"[\"2\"]", "dimension \"2\""},
      {"[true]", "dimension true"}};
  int i = 0;
  for (const auto& [shape, what] : cases) {
    std::string header = R"({"w": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": [0, 8]}})";
    expect_rejected(write_raw("s" + std::to_string(i++) + ".safetensors", header, floats_bytes({1, 2})), "w", what);
  }
}

TEST_F(SafetensorsTest, RejectsShapeWhoseElementCountOverflows) {
  std::string header =
      R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904, 16], "data_offsets": [0, 8]}})";
  expect_rejected(write_raw("o.safetensors", header, floats_bytes({1, 2})), "w", "more elements than");
}

TEST_F(SafetensorsTest, RejectsEndBeforeBegin) {
  std::string header = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})";
  expect_rejected(write_raw("e.safetensors", header, floats_bytes({1, 2, 3})), "w", "end before begin");
}

TEST_F(SafetensorsTest, RejectsOffsetsPastTheBuffer) {
  std::string header = R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})";
  expect_rejected(write_raw("b.safetensors", header, floats_bytes({1, 2, 3})), "w",
                  "past the end of the 12-byte data buffer");
}

TEST_F(SafetensorsTest, RejectsOverlappingTensorRanges) {
  std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  std::string p = write_raw("ov.safetensors", header, floats_bytes({1, 2, 3}));
  expect_rejected(p, "a", "overlap");
  expect_rejected(p, "b", "overlap");
}

TEST_F(SafetensorsTest, EmptyTensorsOverlapNothing) {
  std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [8, 8]},
    "f": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
    "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})";
  SafetensorsFile f = read_safetensors(write_raw("e.safetensors", header, floats_bytes({1, 2, 3})));
  EXPECT_EQ(f.tensors.at("e").shape(), (Shape{0, 3}));
  EXPECT_EQ(f.tensors.at("b").data<float>()[0], 3.0f);
}

// The ranges must tile the buffer: trailing bytes, a gap and a tensor name given twice (JSON keeps the last one
// silently) are refused.
TEST_F(SafetensorsTest, RejectsBytesNoTensorOwnsAndDuplicateNames) {
  const std::string one = R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  expect_rejected(write_raw("trail.safetensors", one, floats_bytes({1, 2, 3})), "",
                  "4 bytes after the last tensor's data belong to no tensor");
  const std::string gap = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
    "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})";
  expect_rejected(write_raw("gap.safetensors", gap, floats_bytes({1, 2, 3})), "b", "bytes [4, 8) of the data buffer");
  const std::string twice = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
    "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  expect_rejected(write_raw("twice.safetensors", twice, floats_bytes({1, 2})), "", "duplicate key \"w\"");
}

TEST_F(SafetensorsTest, RejectsByteSizeThatDisagreesWithShape) {
  std::string header = R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})";
  expect_rejected(write_raw("z.safetensors", header, floats_bytes({1, 2})), "w",
                  "span 8 bytes but shape (3) of BF16 needs 6");
}

TEST_F(SafetensorsTest, RejectsMetadataThatIsNotStrings) {
  expect_rejected(write_raw("md.safetensors", R"({"__metadata__": {"step": 3}})", ""), "", "key 'step'");
  expect_rejected(write_raw("md2.safetensors", R"({"__metadata__": [1]})", ""), "", "__metadata__ is [1]");
}

TEST_F(SafetensorsTest, MissingFileIsAnErrorNamingIt) {
  expect_rejected(path("absent.safetensors"), "", "cannot read a safetensors file: No such file or directory");
}

TEST_F(SafetensorsTest, WriterRejectsDuplicateAndReservedNames) {
  std::string p = path("d.safetensors");
  Tensor t = random_tensor({2}, DType::kF32, 1);
  std::string e = error_of([&] { write_safetensors(p, {{"w", t}, {"w", t}}); });
  EXPECT_NE(e.find("'w' given twice"), std::string::npos) << e;
  e = error_of([&] { write_safetensors(p, {{"__metadata__", t}}); });
  EXPECT_NE(e.find("cannot be named"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(p));
}

}  // namespace
}  // namespace rlcpp
