// Where the tests find the repository's own files (tests/data/...): $RLCPP_SOURCE_DIR when it is set, else the
// source tree the test was built from. ctest sets it to that tree; scripts/check_self_contained.sh points it at a
// bare clone of the repository, with nothing beside it, to show that every fixture a test reads is in the
// repository (tests/data/README.md lists them).
#pragma once

#include <cstdlib>
#include <string>

namespace rlcpp {

inline std::string test_source_dir() {
  const char* dir = std::getenv("RLCPP_SOURCE_DIR");
  return dir && *dir ? std::string(dir) : std::string(RLCPP_SOURCE_DIR);
}

// The Qwen3 tokenizer.json and tokenizer_config.json (Apache-2.0, tests/data/qwen3/README.md).
inline std::string qwen3_fixture_dir() { return test_source_dir() + "/tests/data/qwen3"; }

}  // namespace rlcpp
