// The ledger at the start of `rlcpp train` (report/run_ledger.h writes it): this machine's yardsticks measured
// once, with the process's resident memory before them.
#pragma once

#include <string>

#include "model/parameters.h"
#include "report/ledger.h"

namespace rlcpp {

// 1024³ matmuls, sgemm's and the packed bf16 product's (the fastest of 5 each), and a 64 MiB copy (the median of
// 5), about 0.3 s on 2 cores: kernels/machine_peaks.h.
MachineFigures measure_machine_figures();

// Reads the peak resident memory so far, measures the machine (then resets the peak past the measurement's
// buffers), prints the ledger and writes RUN_DIR/ledger.json.
void start_run_ledger(const std::string& run_dir, const ParameterStore& params, const LedgerDtypes& dtypes = {});

// After the run's last step: the 1024³ matmul peaks measured again (about 0.1 s), kept in ledger.json beside the
// start's, the larger of the two being the one MFU divides by (report/run_ledger.h record_end_of_run_peak).
void end_run_ledger(const std::string& run_dir);

}  // namespace rlcpp
