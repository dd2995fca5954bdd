// The ledger at the start of `rlcpp train` (report/run_ledger.h writes it): this machine's yardsticks measured
// once, with the process's resident memory before them.
#pragma once

#include <string>

#include "model/parameters.h"
#include "report/ledger.h"

namespace rlcpp {

// 1024³ matmul and a 64 MiB copy, medians of 5 (about 0.2 s on 2 cores): kernels/machine_peaks.h.
MachineFigures measure_machine_figures();

// Reads the peak resident memory so far, measures the machine (then resets the peak past the measurement's
// buffers), prints the ledger and writes RUN_DIR/ledger.json.
void start_run_ledger(const std::string& run_dir, const ParameterStore& params, const LedgerDtypes& dtypes = {});

}  // namespace rlcpp
