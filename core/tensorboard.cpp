#include "core/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/tensorboard_event.pb.h"

namespace rlcpp {

namespace {

// No Debian package offers CRC-32C to C++ (libcrc32c is not in bookworm; zlib's crc32 is another polynomial):
// the byte-wise table form of the reflected CRC.
std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  static const std::array<uint32_t, 256> table = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  RLCPP_CHECK(!ec && std::filesystem::is_directory(dir),
              dir << ": cannot create the TensorBoard directory" << (ec ? ": " + ec.message() : std::string()));
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double start = now_seconds();
  // TensorBoard's own naming: events.out.tfevents.<seconds>.<host>.<pid>; a counter keeps two writers of one
  // process in one second apart.
  static int opened = 0;
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(start)) + "." + host + "." +
          std::to_string(::getpid()) + "." + std::to_string(opened++);
  file_ = std::fopen(path_.c_str(), "wbx");  // never onto an existing file
  RLCPP_CHECK(file_ != nullptr, path_ << ": cannot create the events file: " << std::strerror(errno));
  tensorflow::Event version;
  version.set_wall_time(start);
  version.set_file_version("brain.Event:2");
  write_record(version.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write(const Json& record) {
  RLCPP_CHECK(record.is_object() && record.contains("step") && record["step"].is_number_integer(),
              path_ << ": a metrics record needs an integer \"step\"");
  tensorflow::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(record["step"].get<int64_t>());
  tensorflow::Summary* summary = event.mutable_summary();
  for (const auto& [key, value] : record.items()) {
    if (key == "step" || !value.is_number()) continue;
    const double v = value.get<double>();
    if (!std::isfinite(v)) continue;
    tensorflow::Summary::Value* scalar = summary->add_value();
    scalar->set_tag(key);
    scalar->set_simple_value(static_cast<float>(v));
  }
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::write_record(const std::string& bytes) {
  unsigned char header[12];
  const uint64_t length = bytes.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(length >> (8 * i));
  const uint32_t length_crc = masked_crc32c(header, 8);
  const uint32_t data_crc = masked_crc32c(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i) header[8 + i] = static_cast<unsigned char>(length_crc >> (8 * i));
  unsigned char footer[4];
  for (int i = 0; i < 4; ++i) footer[i] = static_cast<unsigned char>(data_crc >> (8 * i));
  const bool ok = std::fwrite(header, 1, 12, file_) == 12 &&
                  std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size() &&
                  std::fwrite(footer, 1, 4, file_) == 4 && std::fflush(file_) == 0;
  RLCPP_CHECK(ok, path_ << ": writing a TensorBoard event failed: " << std::strerror(errno));
}

MetricsLog::MetricsLog(const std::string& run_dir, const LoggingConfig& logging)
    : jsonl_(run_dir + "/metrics.jsonl") {
  if (logging.tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir + "/tensorboard");
}

void MetricsLog::write(const Json& record) {
  jsonl_.write(record);
  if (tensorboard_) tensorboard_->write(record);
}

}  // namespace rlcpp
