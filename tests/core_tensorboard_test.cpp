// TensorBoard event files (core/tensorboard.h): the CRC against the standard check value, each record's
// framing and Event decoded back with protobuf, and the directory loaded by TensorBoard's own reader.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/tensorboard.h"
#include "core/tensorboard_event.pb.h"
#include "tests/python_env.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

TEST(TensorBoard, Crc32cMatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // CRC-32C's check value (RFC 3720 / iSCSI)
  EXPECT_EQ(crc32c("", 0), 0u);
  const uint32_t c = crc32c("123456789", 9);
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

// The records of an events file, each checked against its two CRCs.
std::vector<tensorflow::Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  std::vector<tensorflow::Event> out;
  size_t at = 0;
  auto u32 = [&](size_t p) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + p, 4);
    return v;
  };
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + at, 8);
    EXPECT_EQ(u32(at + 8), masked_crc32c(bytes.data() + at, 8)) << "length CRC at byte " << at;
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(u32(at + 12 + length), masked_crc32c(data.data(), data.size())) << "data CRC at byte " << at;
    tensorflow::Event e;
    EXPECT_TRUE(e.ParseFromString(data)) << "record at byte " << at;
    out.push_back(e);
    at += 12 + length + 4;
  }
  return out;
}

TEST(TensorBoard, EveryNumberOfARecordIsAScalarAtItsStep) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_tensorboard_test";
  fs::remove_all(dir);
  std::string path;
  {
    TensorBoardWriter w((dir / "tb").string());
    path = w.path();
    w.write(Json{{"step", 1}, {"reward/mean", 0.25}, {"actor/lr", 1e-4}, {"checkpoint", "runs/x"}, {"ok", true}});
    w.write(Json{{"step", 2}, {"reward/mean", 0.5}, {"actor/lr", 1e-4}, {"tokens", 7552}});
    EXPECT_THROW(w.write(Json{{"reward/mean", 1.0}}), Error);  // no step
  }
  EXPECT_EQ(fs::path(path).parent_path(), dir / "tb");
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
  const std::vector<tensorflow::Event> events = read_events(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 1);
  ASSERT_EQ(events[1].summary().value_size(), 2);  // the string and the boolean are not scalars
  std::map<std::string, float> first;
  for (const auto& v : events[1].summary().value()) first[v.tag()] = v.simple_value();
  EXPECT_EQ(first.at("reward/mean"), 0.25f);
  EXPECT_EQ(first.at("actor/lr"), 1e-4f);
  EXPECT_EQ(events[2].step(), 2);
  EXPECT_EQ(events[2].summary().value_size(), 3);
  EXPECT_GT(events[2].wall_time(), 1.7e9);

  // TensorBoard's own reader (tensorboard in .venv, scripts/ensure_python.sh) loads the directory.
  const ::testing::AssertionResult read =
      run_venv_python(std::string(RLCPP_SOURCE_DIR) + "/tests/tensorboard_reader.py '" + (dir / "tb").string() + "'");
  ASSERT_TRUE(read);
  const std::string lines = read.message();
  EXPECT_NE(lines.find("reward/mean 1 0.25"), std::string::npos) << lines;
  EXPECT_NE(lines.find("reward/mean 2 0.5"), std::string::npos) << lines;
  EXPECT_NE(lines.find("tokens 2 7552.0"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("checkpoint"), std::string::npos) << lines;
  fs::remove_all(dir);
}

TEST(TensorBoard, AnUnwritableDirectoryIsNamed) {
  const fs::path file = fs::temp_directory_path() / "rlcpp_tensorboard_file";
  std::ofstream(file) << "x";
  try {
    TensorBoardWriter w(file.string());
    FAIL() << "wrote events into a file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + ": cannot create the TensorBoard directory"),
              std::string::npos) << e.what();
  }
  fs::remove(file);
}

}  // namespace
}  // namespace rlcpp
