// This process's memory as the kernel counts it (/proc/self/status): resident set now (VmRSS) and its peak
// (VmHWM). Resident bytes are what the 16 bytes/parameter rule of thumb is compared against in the run ledger.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace rlcpp {

struct ProcessMemory {
  int64_t rss_bytes = -1;       // VmRSS; -1 where /proc/self/status is missing (not Linux)
  int64_t peak_rss_bytes = -1;  // VmHWM, the high-water mark of VmRSS
};

ProcessMemory read_process_memory();

// Sets the peak (VmHWM) back to the current resident set (Linux: "5" into /proc/self/clear_refs), so a
// transient buffer that is gone (the ledger's bandwidth measurement) does not count as the run's peak.
// False where the kernel refuses.
bool reset_peak_rss();

// Parses the text of a /proc/<pid>/status file ("VmRSS:    12345 kB" lines); missing fields stay -1.
ProcessMemory parse_proc_status(const std::string& status_text);

// The memory the machine can give without swapping (MemAvailable of /proc/meminfo), in bytes; -1 where unknown.
int64_t available_memory_bytes();
// MemAvailable from the text of a /proc/meminfo file ("MemAvailable:   12345 kB"); -1 when missing.
int64_t parse_meminfo_available(const std::string& meminfo_text);

// memory/rss_bytes and memory/peak_rss_bytes for a metrics record (nothing where they are unknown).
std::map<std::string, double> process_memory_metrics();

}  // namespace rlcpp
