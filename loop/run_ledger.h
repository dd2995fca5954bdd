// The ledger (loop/ledger.h) of one run. When `rlcpp train` starts it measures this machine's yardsticks once
// (matmul peak, copy bandwidth), prints the ledger with what is known before the first step and saves
// RUN_DIR/ledger.json; `rlcpp report` reads that back with metrics.jsonl for the figures only the run itself
// measures (resident memory, the engine's KV count, tokens/s, engine step time).
#pragma once

#include <cstdint>
#include <string>

#include "loop/ledger.h"
#include "loop/run_records.h"
#include "model/parameters.h"

namespace rlcpp {

struct MachineFigures {
  int64_t matmul_size = 1024;  // M = N = K of the fp32 matmul timed
  double matmul_peak_flops = kNotMeasured;
  int64_t copy_bytes = int64_t{64} << 20;  // buffer copied
  double copy_bandwidth = kNotMeasured;    // bytes/s, read + write
};

// 1024³ matmul and a 64 MiB copy, medians of 5 (about 0.2 s on 2 cores).
MachineFigures measure_machine_figures();

// At the start of `rlcpp train`: measures the machine, prints the ledger (parameters counted, resident memory
// so far, machine peaks; the rest shows "—" until the run measures it) and writes RUN_DIR/ledger.json:
// {"model": config.json of the model, "parameters_counted", "machine": {...}, "lines": the start ledger}.
void start_run_ledger(const std::string& run_dir, const ParameterStore& params, const LedgerDtypes& dtypes = {});
// The rollout engine's element sizes of a run: what ledger.json recorded (fp32 for a run from before).
LedgerDtypes run_ledger_dtypes(const RunRecords& run);

// The model the run trained: ledger.json's, else the newest checkpoint's config.json; an error naming the run
// directory when it has neither.
ModelConfig run_model_config(const RunRecords& run);

// The machine figures ledger.json holds (kNotMeasured where absent).
MachineFigures run_machine_figures(const RunRecords& run);

// Every measured figure of a run: parameters counted and machine peaks from ledger.json (`machine` where it has
// none), resident memory (max of memory/peak_rss_bytes), the engine's KV bytes per token, training tok/s
// (tokens × ppo.epochs over update_actor seconds), engine tok/s (prefill + generated tokens over rollout
// seconds) and the mean engine step (engine/forward_s over engine/steps), summed over the run's steps.
LedgerFigures run_ledger_figures(const RunRecords& run, const MachineFigures& machine);

}  // namespace rlcpp
