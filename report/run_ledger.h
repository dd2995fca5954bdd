// The ledger (report/ledger.h) of one run. When `rlcpp train` starts, loop/start_ledger.h measures this
// machine's yardsticks once (matmul peak, copy bandwidth) and write_start_ledger prints the ledger with what is
// known before the first step and saves RUN_DIR/ledger.json; `rlcpp report` reads that back with metrics.jsonl
// for the figures only the run itself measures (resident memory, the engine's KV count, tokens/s, engine step
// time).
#pragma once

#include <cstdint>
#include <string>

#include "report/ledger.h"
#include "report/run_records.h"
#include "model/parameters.h"

namespace rlcpp {

// At the start of `rlcpp train`, given the process's peak resident bytes so far (< 0: unknown) and the machine's
// figures: prints the ledger (parameters counted, resident memory, machine peaks; the rest shows "—" until the
// run measures it) and writes RUN_DIR/ledger.json: {"model": config.json of the model, "parameters_counted",
// "machine": {...}, "rollout_bytes", "lines": the start ledger}.
void write_start_ledger(const std::string& run_dir, const ParameterStore& params, int64_t peak_rss_bytes,
                        const MachineFigures& machine, const LedgerDtypes& dtypes = {});
// At the end of `rlcpp train`: the matmul peaks (sgemm's, the bf16 product's) measured again after the last
// step. RUN_DIR/ledger.json keeps both measurements of each (machine.matmul_peak_flops_start, ..._end) and the
// larger as machine.matmul_peak_flops (bf16_matmul_peak_flops), the one MFU divides by: the machine reached at
// least that, and one measurement slowed by other work on the cores would otherwise put the run's MFU above 100 %.
void record_end_of_run_peak(const std::string& run_dir, double matmul_peak_flops,
                            double bf16_matmul_peak_flops = kNotMeasured);

// The rollout engine's element sizes of a run: what ledger.json recorded (fp32 for a run from before).
LedgerDtypes run_ledger_dtypes(const RunRecords& run);

// The model the run trained: ledger.json's, else the newest checkpoint's config.json; an error naming the run
// directory when it has neither.
ModelConfig run_model_config(const RunRecords& run);

// The machine figures ledger.json holds (kNotMeasured where absent).
MachineFigures run_machine_figures(const RunRecords& run);

// Every measured figure of a run: parameters counted and machine peaks from ledger.json (`machine` where it has
// none), resident memory (max of memory/peak_rss_bytes), the engine's KV bytes per token, training tok/s
// (tokens/trained over update_actor seconds), engine tok/s (prefill + generated tokens over
// timing_s/rollout_draws) and the mean engine step (engine/forward_s over engine/steps), summed over the run's
// steps. A run from before tokens/trained was recorded has no training tok/s (its "tokens" counted every
// sampled sequence, not the trained ones).
LedgerFigures run_ledger_figures(const RunRecords& run, const MachineFigures& machine);

}  // namespace rlcpp
