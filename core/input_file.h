// The one way rlcpp opens a file it reads (STYLE.md "Files in"): configs, checkpoints' JSON and weights,
// tokenizers, datasets, prompt and score inputs, run records, key files. The file must be a regular file (a
// FIFO would block forever, /dev/zero or a directory never end or fail obscurely) no larger than its kind's
// limit; every error names the path, what it is, and what was expected. The limits are here, in one place.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace rlcpp {

// What a file is read as, for the messages ("PATH: is a directory, not a JSON config"), and its size bound.
struct InputKind {
  const char* what;
  uint64_t max_bytes;
  // The same limit under a more telling name ("a JSONL file of preference pairs").
  constexpr InputKind named(const char* name) const { return {name, max_bytes}; }
};

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// Configs and the small JSON of a checkpoint or run (config.json, state.json, ledger.json, the shard index, a
// sweep and its base): far below a megabyte in practice.
inline constexpr InputKind kConfigInput{"a JSON config file", 64 * kMiB};
// tokenizer.json (a 256k vocabulary's is ~35 MB) and tokenizer_config.json.
inline constexpr InputKind kTokenizerInput{"a tokenizer file", 512 * kMiB};
// A checkpoint's pending_rollouts.json (the async pipeline's draws of later steps).
inline constexpr InputKind kCheckpointStateInput{"a checkpoint state file", 4 * kGiB};
// JSONL datasets and inputs: task.path, preference pairs, --prompts, score's and tokenize's --input.
inline constexpr InputKind kDatasetInput{"a JSONL data file", 64 * kGiB};
// A run's metrics.jsonl and samples.jsonl, read back by resume and reports.
inline constexpr InputKind kRunRecordsInput{"a run's JSONL record file", 64 * kGiB};
// CURVE key files (`rlcpp keys`: a few lines of 40-character keys) and a run's lock file (a pid).
inline constexpr InputKind kKeyFileInput{"a CURVE key file", 64 * 1024};
inline constexpr InputKind kLockFileInput{"a run lock file", 64 * 1024};
// safetensors weights: streamed tensor by tensor, bounded by what their header and config.json describe.
inline constexpr InputKind kWeightsInput{"a safetensors file", UINT64_MAX};

// An input opened for reading: a regular file within its kind's size limit (checked on the open descriptor, so
// the file checked is the file read). Move-only; closes on destruction.
class InputFile {
 public:
  // Throws rlcpp::Error naming `path`: missing or unreadable (with the system's reason), not a regular file (a
  // directory, FIFO, socket or device, and for a symbolic link where it points), or larger than `kind` allows.
  InputFile(const std::string& path, const InputKind& kind);
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // bytes at open; reads stop there even if the file grows
  mode_t permissions() const { return permissions_; }  // st_mode & 07777

  // `bytes` bytes at `offset`; throws naming the file when they are not all there.
  void read_at(uint64_t offset, void* dst, size_t bytes) const;
  // The whole file (its first size() bytes).
  std::string read_all() const;
  // Calls on_line(line, number) for each line, numbered from 1, without its '\n' (a '\r' before it is kept);
  // a last line without a newline is passed too. Memory: one line at a time.
  void for_each_line(const std::function<void(std::string_view line, int64_t number)>& on_line) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  mode_t permissions_ = 0;
};

// InputFile(path, kind).read_all().
std::string read_input_file(const std::string& path, const InputKind& kind);

}  // namespace rlcpp
