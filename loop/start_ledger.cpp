#include "loop/start_ledger.h"

#include "core/process_memory.h"
#include "kernels/machine_peaks.h"
#include "report/run_ledger.h"

namespace rlcpp {

MachineFigures measure_machine_figures() {
  MachineFigures m;
  m.matmul_peak_flops = measure_matmul_flops(m.matmul_size, m.matmul_size, m.matmul_size, 5);
  m.bf16_matmul_peak_flops = measure_packed_bf16_flops(m.matmul_size, m.matmul_size, m.matmul_size, 5);
  m.copy_bandwidth = measure_copy_bandwidth(m.copy_bytes, 5);
  return m;
}

void start_run_ledger(const std::string& run_dir, const ParameterStore& params, const LedgerDtypes& dtypes) {
  // Memory first: the measurement's buffers (64 MiB twice) are freed after it, and the peak is reset past them.
  const ProcessMemory memory = read_process_memory();
  const MachineFigures machine = measure_machine_figures();
  reset_peak_rss();
  write_start_ledger(run_dir, params, memory.peak_rss_bytes, machine, dtypes);
}

void end_run_ledger(const std::string& run_dir) {
  const int64_t size = MachineFigures{}.matmul_size;
  record_end_of_run_peak(run_dir, measure_matmul_flops(size, size, size, 5),
                         measure_packed_bf16_flops(size, size, size, 5));
}

}  // namespace rlcpp
