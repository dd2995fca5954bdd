// Outputs never land on inputs (STYLE.md "Files out"): an output file or directory that is one of a command's
// input files, or lies inside one of its input directories (a checkpoint), is refused before any work. Paths
// are compared in canonical form, so a symbolic link, `./` or `..` does not slip past.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

namespace rlcpp::cli {

// `path` absolute, with symbolic links, `.` and `..` resolved as far as it exists, and no trailing separator.
inline std::filesystem::path canonical_form(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path).lexically_normal();
  if (p.filename().empty() && p.has_relative_path()) p = p.parent_path();
  return p;
}

// The files a tokenizer argument reads: a directory (read as a whole), or a tokenizer.json and the
// tokenizer_config.json beside it.
inline std::vector<std::string> tokenizer_inputs(const std::string& tokenizer) {
  namespace fs = std::filesystem;
  if (tokenizer.empty() || fs::is_directory(tokenizer)) return {tokenizer};
  return {tokenizer, (fs::path(tokenizer).parent_path() / "tokenizer_config.json").string()};
}

// Refuses `out` (the option `what`, e.g. "generate --out") when it is one of `inputs` or inside one that is a
// directory; "" entries are skipped.
inline void check_output_is_outside_inputs(const std::string& out, const std::vector<std::string>& inputs,
                                           const std::string& what) {
  namespace fs = std::filesystem;
  if (out.empty()) return;
  const fs::path target = canonical_form(out);
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    const fs::path source = canonical_form(in);
    RLCPP_CHECK(target != source, what << " '" << out << "' is the input file '" << in
                                       << "'; nothing was written (choose another output)");
    const bool inside = std::mismatch(source.begin(), source.end(), target.begin(), target.end()).first == source.end();
    RLCPP_CHECK(!inside, what << " '" << out << "' is inside the input directory '" << in
                              << "'; nothing was written (choose an output outside it)");
  }
}

// An output file: not a directory, and not an input (check_output_is_outside_inputs).
inline void check_output_is_not_an_input(const std::string& out, const std::vector<std::string>& inputs,
                                         const std::string& command) {
  if (out.empty()) return;
  std::error_code ec;
  RLCPP_CHECK(!std::filesystem::is_directory(out, ec), command << " --out '" << out << "' is a directory; give a file");
  check_output_is_outside_inputs(out, inputs, command + " --out");
}

}  // namespace rlcpp::cli
