// The one way rlcpp writes an output file or standard output (STYLE.md "Files out"): every write, flush and
// close is checked, and a failure (a full disk, /dev/full, a closed pipe) throws rlcpp::Error naming the file, or
// "standard output", with the system's reason, so that no command exits 0 on an output cut short.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace rlcpp {

class OutputFile {
 public:
  enum class Mode {
    kReplace,  // created, or emptied when it exists
    kAppend,   // created when missing, else written at its end
  };

  // Standard output (shared with printf: what both write stays in order).
  OutputFile();
  // `path`; throws naming it when it cannot be opened.
  OutputFile(const std::string& path, Mode mode);
  // Without close(): standard output and kAppend files are flushed (errors ignored: an exception may be on its
  // way); a kReplace regular file is removed, so that an output cut short by an error never passes for a whole one.
  ~OutputFile();
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view text);
  // What was written reaches the file (a JSONL record survives the process being killed).
  void flush();
  // Flushes and closes (standard output is flushed only); a failure throws naming the file.
  void close();
  // "'PATH'" or "standard output", for messages.
  std::string name() const;

 private:
  void fail(const char* doing, int err);

  std::string path_;  // "" for standard output
  std::FILE* file_ = nullptr;
  bool remove_unless_closed_ = false;
};

// Flushes standard output; throws "writing standard output failed: REASON" when it or any earlier write to it
// failed (main calls it after every command, so a `> /dev/full` never exits 0).
void check_standard_output();

}  // namespace rlcpp
