// The --out file of a command that reads input files: it must not be one of them (score, generate and tokenize
// read their whole input before writing, so an --out naming the input would replace the user's data with the
// output).
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace rlcpp::cli {

inline void check_output_is_not_an_input(const std::string& out, std::initializer_list<std::string> inputs,
                                         const std::string& command) {
  namespace fs = std::filesystem;
  if (out.empty()) return;
  std::error_code ec;
  RLCPP_CHECK(!fs::is_directory(out, ec), command << " --out '" << out << "' is a directory; give a file");
  for (const std::string& in : inputs) {
    if (in.empty() || !fs::exists(out, ec)) continue;
    RLCPP_CHECK(!fs::equivalent(out, in, ec), command << " --out '" << out << "' is the input file '" << in
                                                      << "'; nothing was written (choose another output file)");
  }
}

}  // namespace rlcpp::cli
