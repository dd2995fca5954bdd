#include "core/process_memory.h"

#include <fstream>
#include <sstream>

namespace rlcpp {

ProcessMemory parse_proc_status(const std::string& status_text) {
  ProcessMemory m;
  std::istringstream in(status_text);
  for (std::string line; std::getline(in, line);) {
    int64_t* field = line.rfind("VmRSS:", 0) == 0   ? &m.rss_bytes
                     : line.rfind("VmHWM:", 0) == 0 ? &m.peak_rss_bytes
                                                    : nullptr;
    if (field == nullptr) continue;
    std::istringstream value(line.substr(6));
    int64_t kib = 0;
    std::string unit;
    if (value >> kib >> unit && unit == "kB") *field = kib * 1024;
  }
  return m;
}

ProcessMemory read_process_memory() {
  std::ifstream in("/proc/self/status");
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_proc_status(text.str());
}

int64_t parse_meminfo_available(const std::string& meminfo_text) {
  std::istringstream in(meminfo_text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream value(line.substr(13));
    int64_t kib = 0;
    std::string unit;
    if (value >> kib >> unit && unit == "kB") return kib * 1024;
  }
  return -1;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return -1;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_meminfo_available(text.str());
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

std::map<std::string, double> process_memory_metrics() {
  const ProcessMemory m = read_process_memory();
  std::map<std::string, double> out;
  if (m.rss_bytes >= 0) out["memory/rss_bytes"] = static_cast<double>(m.rss_bytes);
  if (m.peak_rss_bytes >= 0) out["memory/peak_rss_bytes"] = static_cast<double>(m.peak_rss_bytes);
  return out;
}

}  // namespace rlcpp
