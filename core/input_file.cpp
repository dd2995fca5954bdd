#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace rlcpp {

namespace {

// "a directory", "a FIFO (named pipe)", ... for a file that is not a regular one.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a file of an unknown type";
}

// " (a symbolic link to /dev/zero)" when `path` is a link, else "".
std::string link_note(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return "";
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::canonical(path, ec);
  return " (a symbolic link to " + (ec ? std::filesystem::read_symlink(path, ec).string() : target.string()) + ")";
}

// "64 MiB", "512 kiB", "123 bytes".
std::string byte_count(uint64_t bytes) {
  if (bytes >= kGiB && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

void check_regular(const std::string& path, mode_t mode, const InputKind& kind) {
  RLCPP_CHECK(S_ISREG(mode), path << link_note(path) << ": is " << file_type_name(mode) << ", not " << kind.what);
}

}  // namespace

InputFile::InputFile(const std::string& path, const InputKind& kind) : path_(path) {
  // stat first: opening a device can have effects of its own, and a FIFO would block the open itself.
  struct stat st;
  RLCPP_CHECK(::stat(path.c_str(), &st) == 0,
              path << link_note(path) << ": cannot read " << kind.what << ": " << std::strerror(errno));
  check_regular(path, st.st_mode, kind);
  // O_NONBLOCK: should the path have been swapped for a FIFO since the stat, the open does not wait for a writer;
  // fstat below then refuses it. On a regular file the flag changes nothing.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  RLCPP_CHECK(fd_ >= 0, path << ": cannot open " << kind.what << ": " << std::strerror(errno));
  try {
    RLCPP_CHECK(::fstat(fd_, &st) == 0, path << ": cannot read " << kind.what << ": " << std::strerror(errno));
    check_regular(path, st.st_mode, kind);
    size_ = static_cast<uint64_t>(st.st_size);
    permissions_ = st.st_mode & 07777;
    RLCPP_CHECK(size_ <= kind.max_bytes, path << ": is " << size_ << " bytes, more than the " << byte_count(kind.max_bytes)
                                              << " allowed for " << kind.what << " (core/input_file.h)");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_), permissions_(other.permissions_) {
  other.fd_ = -1;
}

void InputFile::read_at(uint64_t offset, void* dst, size_t bytes) const {
  RLCPP_CHECK(offset <= size_ && bytes <= size_ - offset,
              path_ << ": bytes [" << offset << ", " << offset + bytes << ") are past the end of the " << size_
                    << "-byte file");
  char* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    RLCPP_CHECK(n >= 0, path_ << ": reading bytes [" << offset << ", " << offset + bytes
                              << ") failed: " << std::strerror(errno));
    RLCPP_CHECK(n > 0, path_ << ": the file ended at byte " << offset + done << " while reading bytes [" << offset
                             << ", " << offset + bytes << ") (it shrank while being read)");
    done += static_cast<size_t>(n);
  }
}

std::string InputFile::read_all() const {
  std::string text(size_, '\0');
  read_at(0, text.data(), text.size());
  return text;
}

void InputFile::for_each_line(const std::function<void(std::string_view line, int64_t number)>& on_line) const {
  constexpr size_t kChunk = size_t{1} << 20;
  std::string pending;  // the line read so far (no '\n' yet)
  std::string chunk;
  int64_t number = 0;
  for (uint64_t offset = 0; offset < size_;) {
    chunk.resize(static_cast<size_t>(std::min<uint64_t>(kChunk, size_ - offset)));
    read_at(offset, chunk.data(), chunk.size());
    offset += chunk.size();
    size_t begin = 0;
    for (size_t end; (end = chunk.find('\n', begin)) != std::string::npos; begin = end + 1) {
      const std::string_view piece(chunk.data() + begin, end - begin);
      if (pending.empty()) {
        on_line(piece, ++number);
      } else {
        pending.append(piece);
        on_line(pending, ++number);
        pending.clear();
      }
    }
    pending.append(chunk, begin, std::string::npos);
  }
  if (!pending.empty()) on_line(pending, ++number);
}

std::string read_input_file(const std::string& path, const InputKind& kind) { return InputFile(path, kind).read_all(); }

}  // namespace rlcpp
