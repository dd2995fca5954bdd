// Run metrics: a JSONL writer (one object per line, flushed per line so a crash loses nothing written),
// a wall-clock stopwatch and the progress line's duration format.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/output_file.h"

namespace rlcpp {

class JsonlWriter {
 public:
  // Appends to `path` (created when missing).
  explicit JsonlWriter(const std::string& path);
  // One line, flushed; a failed write (a full disk) throws naming the file.
  void write(const Json& record);

 private:
  OutputFile out_;
};

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// "1h02m", "3m05s", "42s".
std::string format_duration(double seconds);
// "12.3k", "4.56M".
std::string format_rate(double per_second);

// The median of `values` (the mean of the middle two for an even count); `values` must not be empty.
double median_of(std::vector<double> values);

}  // namespace rlcpp
