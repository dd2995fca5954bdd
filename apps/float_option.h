// A 32-bit float option whose text is checked before it is converted: CLI11 alone turns 1e308 into inf and
// 1e-300 into 0, and the range checks after it would then report "inf" or "got 0", not what was written.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace rlcpp::cli {

inline CLI::Option* add_float_option(CLI::App* cmd, const std::string& name, float& value, const std::string& help) {
  const CLI::Validator fits_float(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double written = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "";  // not a number: CLI11's conversion says so
        const float stored = static_cast<float>(written);
        const bool overflows = errno == ERANGE || (std::isinf(stored) && !std::isinf(written));
        if (overflows || (stored == 0 && written != 0))
          return text + " is outside the range of a 32-bit float (it would be stored as " +
                 (stored == 0 ? std::string("0") : std::string(stored > 0 ? "inf" : "-inf")) + ")";
        return "";
      },
      "");
  return cmd->add_option(name, value, help)->check(fits_float);
}

}  // namespace rlcpp::cli
