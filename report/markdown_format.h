// Numbers in the Markdown tables of the reports (report.md, mismatch.md): `missing` stands where a figure is not
// finite (not measured).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace rlcpp {

// 0.1234 -> "12.3 %".
inline std::string format_percent(double share, const char* missing) {
  if (!std::isfinite(share)) return missing;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100 * share);
  return buf;
}

// v with `digits` decimals.
inline std::string format_fixed(double v, int digits, const char* missing) {
  if (!std::isfinite(v)) return missing;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace rlcpp
