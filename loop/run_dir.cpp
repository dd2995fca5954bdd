#include "loop/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/input_file.h"
#include "model/checkpoint.h"

namespace rlcpp {

namespace fs = std::filesystem;

class RunLock {
 public:
  // The lock of `dir`, or null when another process holds it (`holder` then says which, from the file).
  static std::shared_ptr<RunLock> try_acquire(const std::string& dir, std::string& holder) {
    const std::string path = dir + "/run.lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    RLCPP_CHECK(fd >= 0, "cannot open " << path << ": " << std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      RLCPP_CHECK(err == EWOULDBLOCK, "cannot lock " << path << ": " << std::strerror(err));
      const std::string text = read_input_file(path, kLockFileInput);
      const std::string pid = text.substr(0, text.find('\n'));
      holder = "process " + (pid.empty() ? std::string("?") : pid) + " (" + path + ")";
      return nullptr;
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    // Best effort: without the pid the lock still holds; only the message naming the holder is poorer.
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
    return std::shared_ptr<RunLock>(new RunLock(fd));
  }
  ~RunLock() { ::close(fd_); }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  explicit RunLock(int fd) : fd_(fd) {}
  int fd_;
};

RunDir RunDir::create_fresh(const std::string& path) {
  RLCPP_CHECK(!path.empty(), "run directory: empty path");
  for (int i = 1;; ++i) {
    const std::string chosen = i == 1 ? path : path + "-" + std::to_string(i);
    if (fs::exists(fs::path(chosen) / "config.json")) continue;
    std::error_code ec;
    fs::create_directories(fs::path(chosen) / "checkpoints", ec);
    RLCPP_CHECK(!ec, "cannot create run directory '" << chosen << "': " << ec.message());
    std::string holder;
    auto lock = RunLock::try_acquire(chosen, holder);
    // Another run starting at the same moment took it, or wrote its config since the check above.
    if (!lock || fs::exists(fs::path(chosen) / "config.json")) continue;
    RunDir run(chosen);
    run.lock_ = std::move(lock);
    return run;
  }
}

RunDir RunDir::create_with_config(const std::string& path, const Json& resolved_config) {
  RunDir run = create_fresh(path);
  Json resolved = resolved_config;
  resolved["run_dir"] = run.path();
  run.write_config(resolved);
  return run;
}

RunDir RunDir::open_existing(const std::string& path) {
  RLCPP_CHECK(fs::exists(fs::path(path) / "config.json"),
              "'" << path << "' is not a run directory (it has no config.json)");
  return RunDir(path);
}

RunDir RunDir::open_to_resume(const std::string& path) {
  RunDir run = open_existing(path);
  std::string holder;
  run.lock_ = RunLock::try_acquire(path, holder);
  RLCPP_CHECK(run.lock_, "'" << path << "' is in use: " << holder
                             << " is running it; wait for it to finish or stop it before resuming");
  return run;
}

std::string RunDir::checkpoint_dir(int64_t step) const {
  return path_ + "/checkpoints/step_" + std::to_string(step);
}

std::string RunDir::latest_checkpoint() const { return latest_step_checkpoint(path_ + "/checkpoints"); }

void RunDir::write_config(const Json& resolved) const { write_json_file_atomic(file("config.json"), resolved); }

}  // namespace rlcpp
