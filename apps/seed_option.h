// A seed option read as an unsigned 64-bit integer, exactly: CLI11 alone saturates a number past 2^64 - 1 to the
// largest value and would run with a seed the user did not give.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

namespace rlcpp::cli {

inline CLI::Option* add_seed_option(CLI::App* cmd, const std::string& name, uint64_t& seed, const std::string& help) {
  const CLI::Validator exact_uint64(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || stop != end)
          return "must be an integer in [0, 18446744073709551615], got '" + text + "'";
        return "";
      },
      "UINT64");
  return cmd->add_option(name, seed, help)->check(exact_uint64);
}

}  // namespace rlcpp::cli
