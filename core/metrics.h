// Run metrics: a JSONL writer (one object per line, flushed per line so a crash loses nothing written),
// a wall-clock stopwatch and the progress line's duration format.
#pragma once

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "core/config.h"

namespace rlcpp {

class JsonlWriter {
 public:
  JsonlWriter() = default;
  // Appends to `path` (created when missing).
  explicit JsonlWriter(const std::string& path);
  void write(const Json& record);
  bool is_open() const { return out_.is_open(); }

 private:
  std::string path_;
  std::ofstream out_;
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
