// Shared pieces of the `rlcpp bench` programs: timing statistics, the sgemm peak of this machine, and running
// the PyTorch peer (bench/peers/torch_peer.py) in the same run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/metrics.h"  // median_of

namespace rlcpp::bench {

// Median seconds of `iters` calls after `warmup` untimed ones.
double median_seconds(const std::function<void()>& fn, int warmup, int iters);

// GFLOP/s of an M x N x K sgemm (OpenBLAS, all threads; kernels/machine_peaks.h), median of a few runs.
double sgemm_gflops(int64_t m, int64_t n, int64_t k);

// Runs `bench/peers/torch_peer.py ARGS` with Debian's python3 and returns its JSON line; a null Json with the
// reason printed when the peer cannot run (no torch).
Json run_torch_peer(const std::string& source_dir, const std::string& args);
// Runs `PYTHON SCRIPT ARGS` and returns the JSON object it prints last; a null Json, the command printed, when
// it cannot run.
Json run_python_peer(const std::string& python, const std::string& script, const std::string& args);
// What a peer's shell command starts with so that it runs in the environment its machine gave: "" normally;
// where scripts/device_check.sh set LD_LIBRARY_PATH for rlcpp's own binaries (the bundle's and CUDA's libraries)
// and kept the machine's value in RLCPP_PEER_LD_LIBRARY_PATH, that value restored ("env -u LD_LIBRARY_PATH " when
// it was empty), so a peer's PyTorch loads its own CUDA libraries, not the ones beside rlcpp.
std::string peer_environment();

// The source tree (for bench/peers/ and bench/RESULTS.md): $RLCPP_SOURCE_DIR, else the build's source dir.
std::string source_dir();

// A fresh directory TMP/rlcpp_TAG.XXXXXX, removed with everything in it when this goes out of scope.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace rlcpp::bench
