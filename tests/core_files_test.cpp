// Files in and out (core/input_file.h, core/output_file.h): an input is a regular file within its kind's size
// limit, read whole or line by line; anything else (a directory, a FIFO, /dev/zero behind a symbolic link, a
// file past the limit) is refused naming the path and what it is, without reading it. An output's failed write
// (/dev/full) is an error naming the file; an output cut short is not left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rlcpp_files_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::vector<std::string> lines_of(const InputFile& in) {
  std::vector<std::string> out;
  int64_t expected = 0;
  in.for_each_line([&](std::string_view line, int64_t number) {
    EXPECT_EQ(number, ++expected);
    out.emplace_back(line);
  });
  return out;
}

TEST_F(Files, ARegularFileIsReadWholeAndLineByLine) {
  const std::string text = "one\r\n\ntwo\nlast without newline";
  const InputFile in(write("a.jsonl", text), kDatasetInput);
  EXPECT_EQ(in.size(), text.size());
  EXPECT_EQ(in.read_all(), text);
  EXPECT_EQ(lines_of(in), (std::vector<std::string>{"one\r", "", "two", "last without newline"}));
  EXPECT_EQ(lines_of(InputFile(write("empty", ""), kDatasetInput)), std::vector<std::string>{});
  // Lines that straddle the reader's 1 MiB chunks arrive whole.
  const std::string long_line(3 << 20, 'x');
  const InputFile big(write("big.jsonl", "a\n" + long_line + "\nb\n"), kDatasetInput);
  EXPECT_EQ(lines_of(big), (std::vector<std::string>{"a", long_line, "b"}));
  char bytes[3];
  big.read_at(1, bytes, 3);
  EXPECT_EQ(std::string(bytes, 3), "\nxx");
  expect_error([&] { big.read_at(big.size() - 1, bytes, 2); }, {path("big.jsonl") + ": bytes [", "past the end"});
}

TEST_F(Files, WhatIsNotARegularFileIsNamedAndNeverRead) {
  fs::create_directory(dir_ / "dir.json");
  expect_error([&] { (void)InputFile(path("dir.json"), kConfigInput); },
               {path("dir.json") + ": is a directory, not a JSON config file"});
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  // Opening a FIFO for reading would wait for a writer forever; it is refused at once.
  expect_error([&] { (void)InputFile(path("fifo"), kDatasetInput.named("a JSONL file of prompts")); },
               {path("fifo") + ": is a FIFO (named pipe), not a JSONL file of prompts"});
  fs::create_symlink("/dev/zero", dir_ / "zero.json");
  expect_error([&] { read_input_file(path("zero.json"), kTokenizerInput); },
               {path("zero.json") + " (a symbolic link to /dev/zero): is a character device, not a tokenizer file"});
  expect_error([&] { (void)InputFile(path("absent.json"), kConfigInput); },
               {path("absent.json") + ": cannot read a JSON config file: No such file or directory"});
}

TEST_F(Files, AFilePastItsKindsLimitIsRefusedBeforeReading) {
  const std::string p = write("huge.key", "");
  fs::resize_file(p, kKeyFileInput.max_bytes + 1);  // sparse: nothing is written
  expect_error([&] { (void)InputFile(p, kKeyFileInput); },
               {p + ": is 65537 bytes, more than the 64 KiB allowed for a CURVE key file"});
  fs::resize_file(p, kKeyFileInput.max_bytes);
  EXPECT_EQ(InputFile(p, kKeyFileInput).size(), kKeyFileInput.max_bytes);
}

TEST_F(Files, AFailedWriteNamesTheFileAndLeavesNoPartialOutput) {
  OutputFile full("/dev/full", OutputFile::Mode::kReplace);
  full.write("a line\n");  // buffered; the device refuses it when flushed
  expect_error([&] { full.close(); }, {"'/dev/full' failed: No space left on device"});
  {
    OutputFile out(path("out.jsonl"), OutputFile::Mode::kReplace);
    out.write("half an output");
    // An error on its way leaves the file unclosed: it must not pass for a whole output.
  }
  EXPECT_FALSE(fs::exists(path("out.jsonl")));
  {
    OutputFile out(path("out.jsonl"), OutputFile::Mode::kReplace);
    out.write("whole\n");
    out.close();
  }
  {
    OutputFile log(path("out.jsonl"), OutputFile::Mode::kAppend);
    log.write("appended\n");
    log.flush();
  }  // an append-only log keeps what it holds even unclosed
  std::ifstream in(path("out.jsonl"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "whole\nappended\n");
  expect_error([&] { (void)OutputFile(path("no_dir/x"), OutputFile::Mode::kReplace); },
               {"cannot open '" + path("no_dir/x") + "' for writing: No such file or directory"});
}

}  // namespace
}  // namespace rlcpp
