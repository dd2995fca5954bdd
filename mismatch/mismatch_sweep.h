// `rlcpp mismatch SWEEP`: a sweep of short GRPO runs over the rollout/trainer mismatch sources (rollout dtype,
// weight quantisation, trainer dtype, batch invariance) and the corrections of a mismatch (TIS, MIS, IcePop,
// bypass), every run from one shared starting policy. This file reads the sweep file and runs the points;
// mismatch/mismatch_report.h writes OUT/report.md and OUT/plots/ from their run directories.
//
// The sweep file (JSON):
//
//   {
//     "base": "grpo_add3.json",          // a train config file (relative to the sweep file's folder), or an
//                                        // inline train config object
//     "set": {"steps": 12, "rollout.prompts_per_step": 128},   // overrides common to every point
//     "points": [                        // one short run each, in this order
//       {"name": "fp32", "source": "baseline", "set": {}},
//       {"name": "rollout_bf16", "source": "rollout dtype", "set": {"rollout.dtype": "bf16"}},
//       ...
//     ],
//     "baseline": "fp32",                // optional: the point repeated at the top of every table (default: the
//                                        // first point whose set is empty, if any)
//     "out": "runs/mismatch"             // optional: the sweep's directory, relative to the working directory
//                                        // like a run_dir (--out overrides it)
//   }
//
// A "set" maps dotted key paths (as `--set` takes them) to JSON values; an object value merges into the config
// at that path. A point's config is: base, then the sweep's "set", then the command line's --set, then
// --steps, then the point's own "set". "source" (default: "baseline" for an empty set, else the point's keys)
// names the table of report.md the point goes in.
//
// Every point starts from the same policy: when the config (base + common sets) has warm_start.enabled and no
// init_checkpoint, the SFT warm start runs once, in OUT/sft, through run_sft as `rlcpp train` runs it, and every
// point gets init_checkpoint = its final checkpoint with warm_start.enabled = false. So a point's own set must
// not touch warm_start.* or init_checkpoint, and no set may give run_dir (point P runs in OUT/P).
//
// Errors name the sweep file and the key path: an unknown key (sweep, point or train config), a wrong type, a bad
// value (validated for every point before anything runs), a duplicate or unusable point name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "loop/sft_run.h"
#include "loop/train_config.h"

namespace rlcpp {

struct SweepPoint {
  std::string name;    // its run directory's name under OUT (letters, digits, '_', '-', '.')
  std::string source;  // the table of report.md it goes in
  Json set;            // its own overrides as written: {dotted key: value}
  TrainConfig config;  // resolved and validated; run_dir and init_checkpoint are filled when it runs
};

struct MismatchSweep {
  std::string file;  // the sweep file
  std::string base;  // the base config file, or "inline"
  std::string out;   // the directory asked for (the sweep takes OUT-2, OUT-3, ... when OUT holds a sweep)
  std::string baseline;  // a point's name, or "" for none
  bool shared_warm_start = false;  // run warm_start_sft once before the points
  SftConfig warm_start_sft;
  std::vector<SweepPoint> points;
};

// What the command line adds: --set (common overrides), --out, --steps (0 = as the sweep file says).
struct SweepOverrides {
  std::vector<std::string> set;
  std::string out;
  int64_t steps = 0;
};

MismatchSweep load_mismatch_sweep(const std::string& path, const SweepOverrides& overrides = {});

struct SweepPointResult {
  std::string name, source;
  Json set;             // the point's own overrides
  int64_t steps = 0;    // as configured
  std::string run_dir;  // where it ran ("" when it failed before its run directory existed)
  std::string error;    // "" = finished
  double seconds = 0;
};

struct SweepResult {
  std::string out_dir;               // the directory actually used
  std::string sweep_file, base;
  std::string baseline;
  std::string start_checkpoint;      // the shared warm start's checkpoint, or the base's init_checkpoint, or ""
  double warm_start_accuracy = -1;   // held-out accuracy of the shared warm start (-1: none ran)
  double warm_start_seconds = 0;
  std::vector<SweepPointResult> points;
  double seconds = 0;                // the whole sweep's wall time (warm start and every point)
};

// The directory a sweep asked for `out` uses: `out` itself, or the first `out-2`, `out-3`, ... that holds no
// sweep (sweep.json), so an earlier sweep's runs and report are never overwritten.
std::string fresh_sweep_dir(const std::string& out);

// Runs the shared warm start (if any), then every point in order (each `run_train` prints its step lines;
// before and after each point a progress line with the elapsed time and an ETA). OUT/sweep.json records the
// sweep as resolved. A point that fails is recorded with its error and the sweep goes on with the next.
SweepResult run_mismatch_sweep(const MismatchSweep& sweep);

}  // namespace rlcpp
