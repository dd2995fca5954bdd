#include "core/metrics.h"

#include <algorithm>

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace rlcpp {

JsonlWriter::JsonlWriter(const std::string& path) : out_(path, OutputFile::Mode::kAppend) {}

void JsonlWriter::write(const Json& record) {
  out_.write(record.dump() + "\n");
  out_.flush();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

std::string format_rate(double x) {
  char buf[32];
  if (x >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", x / 1e6);
  else if (x >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", x / 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

double median_of(std::vector<double> values) {
  RLCPP_CHECK(!values.empty(), "median_of: no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace rlcpp
