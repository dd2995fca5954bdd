// What the CLI tests share: running the built `rlcpp` and a temporary directory with a tiny checkpoint.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model/checkpoint.h"
#include "model/init.h"

namespace rlcpp {

struct CliResult {
  int status = 0;
  std::string output;  // stdout and stderr
};

// Runs a shell command line and collects what it prints (stdout and stderr).
inline CliResult run_shell(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  r.status = pclose(pipe);
  return r;
}

// The whole text of a file ("" when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Runs `build/rlcpp ARGS` and collects what it prints.
inline CliResult run_cli(const std::string& args) { return run_shell(std::string(RLCPP_BINARY_DIR) + "/rlcpp " + args); }

// A fresh directory per test holding `ckpt/`, a random tiny model.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("rlcpp_cli_" + std::string(info->test_suite_name()) + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    save_model_checkpoint((dir_ / "ckpt").string(), init_random(model_preset("tiny"), 1));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

}  // namespace rlcpp
