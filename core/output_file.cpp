#include "core/output_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace rlcpp {

OutputFile::OutputFile() : file_(stdout) {}

OutputFile::OutputFile(const std::string& path, Mode mode) : path_(path) {
  RLCPP_CHECK(!path.empty(), "an output file needs a name");
  file_ = std::fopen(path.c_str(), mode == Mode::kReplace ? "wb" : "ab");
  RLCPP_CHECK(file_ != nullptr, "cannot open '" << path << "' for writing: " << std::strerror(errno));
  struct stat st;
  remove_unless_closed_ = mode == Mode::kReplace && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

OutputFile::~OutputFile() {
  if (file_ == nullptr) return;
  if (path_.empty()) {
    std::fflush(file_);
    return;
  }
  std::fclose(file_);
  if (remove_unless_closed_) std::remove(path_.c_str());
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)), file_(other.file_), remove_unless_closed_(other.remove_unless_closed_) {
  other.file_ = nullptr;
}

std::string OutputFile::name() const { return path_.empty() ? "standard output" : "'" + path_ + "'"; }

void OutputFile::fail(const char* doing, int err) {
  // errno 0: the error was an earlier write's (the stream keeps its error flag, not its reason).
  RLCPP_FAIL(doing << " " << name() << " failed: "
                   << (err != 0 ? std::strerror(err) : "an earlier write was refused (a full disk or a closed pipe?)"));
}

void OutputFile::write(std::string_view text) {
  RLCPP_CHECK(file_ != nullptr, name() << ": written after it was closed");
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) fail("writing", errno);
}

void OutputFile::flush() {
  RLCPP_CHECK(file_ != nullptr, name() << ": flushed after it was closed");
  errno = 0;
  if (std::fflush(file_) != 0 || std::ferror(file_)) fail("writing", errno);
}

void OutputFile::close() {
  flush();
  if (path_.empty()) {
    file_ = nullptr;
    return;
  }
  std::FILE* f = file_;
  file_ = nullptr;
  errno = 0;
  if (std::fclose(f) != 0) {
    const int err = errno;
    if (remove_unless_closed_) std::remove(path_.c_str());
    fail("closing", err);
  }
}

void check_standard_output() { OutputFile().close(); }

}  // namespace rlcpp
