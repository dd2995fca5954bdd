// What the libFuzzer targets share. Bad input must be answered with an rlcpp::Error (a message naming what is
// wrong and where); any other exception escaping a parser (a JSON type_error, std::out_of_range, bad_alloc) is a
// bug, and reaches std::terminate, which libFuzzer records as a crash with the input that caused it — as are
// the sanitizers' reports of memory errors, undefined behaviour and stack overflow.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace rlcpp::fuzz {

// Runs `parse`; an rlcpp::Error is the expected answer to bad input.
template <class F>
void expect_only_errors(F&& parse) {
  try {
    parse();
  } catch (const Error&) {
  }
}

// The input written to a file of this process's own (for parsers that read a path).
inline std::string input_file(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = "/tmp/rlcpp_fuzz_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                  static_cast<std::streamsize>(size));
  return path;
}

// The input cut at each NUL byte: the first part and the rest as separate strings.
inline std::vector<std::string> split_at_nul(const uint8_t* data, size_t size) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0)
      parts.emplace_back();
    else
      parts.back().push_back(static_cast<char>(data[i]));
  }
  return parts;
}

}  // namespace rlcpp::fuzz
