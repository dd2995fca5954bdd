// A metrics sink for TensorBoard (logging.tensorboard = true): each metrics record becomes one Event of scalar
// summaries at its step, in an events.out.tfevents.* file under a run's tensorboard/ folder, so `tensorboard
// --logdir runs/` shows every figure of metrics.jsonl live. The Event and Summary messages are encoded by
// protobuf (core/tensorboard_event.proto: TensorFlow's field numbers); the file is TFRecord framing — a
// little-endian uint64 length, its masked CRC32C, the bytes, their masked CRC32C — as TensorBoard's reader
// checks it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "core/config.h"
#include "core/metrics.h"

namespace rlcpp {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes; crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t n);
// TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xA282EAD8.
uint32_t masked_crc32c(const void* data, size_t n);

// The `logging` section of a run's config: metrics sinks besides metrics.jsonl (always written).
struct LoggingConfig {
  bool tensorboard = false;  // RUN/tensorboard/events.out.tfevents.*

  template <class V> void visit(V& v) {
    v("tensorboard", tensorboard, "also write every metric as a TensorBoard scalar under RUN/tensorboard/ "
                                  "(`tensorboard --logdir RUN`)");
  }
};

class TensorBoardWriter {
 public:
  // Creates `dir` and a new events file in it (a resumed run adds a file; TensorBoard reads them in order) and
  // writes the file_version event. Throws naming the path when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event at record["step"] (an integer) with every other finite number of the flat record as a scalar
  // tagged by its key ("reward/mean", "timing_s/rollout", ...); strings, booleans and the rest are skipped.
  // Flushed, so TensorBoard sees it at once. Throws naming the file when the write fails (a full disk).
  void write(const Json& record);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& bytes);

  std::string path_;
  std::FILE* file_ = nullptr;
};

// Where a run writes its metrics records: RUN/metrics.jsonl always, and with logging.tensorboard the same
// records as TensorBoard scalars under RUN/tensorboard/.
class MetricsLog {
 public:
  MetricsLog(const std::string& run_dir, const LoggingConfig& logging);
  void write(const Json& record);

 private:
  JsonlWriter jsonl_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace rlcpp
