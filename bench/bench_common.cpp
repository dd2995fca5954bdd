#include "bench/bench_common.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <stdlib.h>

#include "core/error.h"
#include "core/metrics.h"
#include "kernels/machine_peaks.h"

namespace rlcpp::bench {

double median_seconds(const std::function<void()>& fn, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    Stopwatch w;
    fn();
    times.push_back(w.seconds());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double sgemm_gflops(int64_t m, int64_t n, int64_t k) {
  const double flops = 2.0 * m * n * k;
  const int iters = std::max(3, static_cast<int>(std::min<double>(20, 2e10 / flops)));
  return measure_matmul_flops(m, n, k, iters) / 1e9;
}

std::string source_dir() {
  const char* env = std::getenv("RLCPP_SOURCE_DIR");
  return env ? env : RLCPP_SOURCE_DIR;
}

TempDir::TempDir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("rlcpp_" + tag + ".XXXXXX")).string();
  RLCPP_CHECK(mkdtemp(pattern.data()) != nullptr, "bench: cannot create a directory like " << pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Json run_torch_peer(const std::string& src, const std::string& args) {
  return run_python_peer("/usr/bin/python3", src + "/bench/peers/torch_peer.py", args);
}

std::string peer_environment() {
  const char* kept = std::getenv("RLCPP_PEER_LD_LIBRARY_PATH");
  if (kept == nullptr) return "";
  const std::string value(kept);
  if (value.empty()) return "env -u LD_LIBRARY_PATH ";
  RLCPP_CHECK(value.find('\'') == std::string::npos,
              "bench: RLCPP_PEER_LD_LIBRARY_PATH holds a quote: '" << value << "'");
  return "env LD_LIBRARY_PATH='" + value + "' ";
}

Json run_python_peer(const std::string& python, const std::string& script, const std::string& args) {
  const std::string cmd = peer_environment() + "'" + python + "' '" + script + "' " + args + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return nullptr;
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
  // The peer prints one JSON object as its last line.
  size_t start = out.rfind('{');
  while (start != std::string::npos) {
    try {
      return Json::parse(out.substr(start));
    } catch (const Json::parse_error&) {
      start = start == 0 ? std::string::npos : out.rfind('{', start - 1);
    }
  }
  std::fprintf(stderr, "bench: the peer did not run (%s)\n", cmd.c_str());
  return nullptr;
}

}  // namespace rlcpp::bench
