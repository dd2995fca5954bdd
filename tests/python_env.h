// The Python of the tests that compare with Hugging Face's libraries: the virtual environment that
// scripts/ensure_python.sh makes (.venv/ in the source tree, or $RLCPP_VENV) and scripts/test.sh runs first.
// These tests are not optional: without it they fail, saying how to make it.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace rlcpp {

inline std::string venv_python() {
  const char* venv = std::getenv("RLCPP_VENV");
  const std::string dir = venv && *venv ? std::string(venv) : std::string(RLCPP_SOURCE_DIR) + "/.venv";
  return dir + "/bin/python";
}

// Runs `venv_python() ARGS` (a shell command line after the interpreter); fails the test, with the output,
// unless it exits 0.
inline ::testing::AssertionResult run_venv_python(const std::string& args) {
  const std::string python = venv_python();
  if (!std::filesystem::exists(python))
    return ::testing::AssertionFailure() << python << " does not exist: run scripts/ensure_python.sh (scripts/test.sh "
                                         << "does) to install Hugging Face's tokenizers and transformers from PyPI";
  const std::string cmd = "'" + python + "' " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return ::testing::AssertionFailure() << "cannot run " << cmd;
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) return ::testing::AssertionFailure() << cmd << " exited with status " << status << ":\n" << output;
  return ::testing::AssertionSuccess() << output;
}

}  // namespace rlcpp
