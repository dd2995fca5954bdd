// The step loop `rlcpp train`, `rlcpp sft` and `rlcpp dpo` share. Each command supplies what a step does (its work
// and evaluation, its checkpoint writer, its metrics record, its step line); the driver owns the rest, the same for
// all three:
//   - the cadence: evaluation every eval_every steps, a checkpoint every checkpoint_every steps, a step line every
//     log_every steps, each also at the last step (the step line at step 1 too);
//   - the order that makes a crash lose nothing: the checkpoint is written into step_N.partial, then the step's
//     records (metrics.jsonl, samples.jsonl) are written, then step_N.partial is renamed to step_N and older
//     checkpoints are pruned: a complete checkpoint never lacks its step's records, and a resume drops records
//     past its checkpoint;
//   - a requested stop: the step running finishes with a checkpoint, and the loop ends there (a resume continues
//     at the next step);
//   - the step keys every record carries (step, elapsed_s, checkpoint) and the ETA of the step line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/metrics.h"
#include "core/tensorboard.h"
#include "loop/run_dir.h"
#include "model/lora.h"
#include "model/parameters.h"

namespace rlcpp {

struct RunSchedule {
  int64_t first_step = 1;            // 1, or a resumed checkpoint's step + 1
  int64_t last_step = 0;             // the run's steps (first_step > last_step: nothing to run)
  int64_t eval_every = 0;            // steps; 0 = at the last step only
  int64_t checkpoint_every = 0;      // steps; 0 = at the last step only
  int64_t checkpoint_keep_last = 0;  // newest step checkpoints kept; 0 = all
  int64_t log_every = 1;             // step line period
};

// One step as the driver asks for it.
struct StepPlan {
  int64_t step = 0;
  bool last = false;       // the run's last step
  bool evaluate = false;   // the held-out evaluation is due
  std::string checkpoint;  // RUN_DIR/checkpoints/step_N when the step ends with a checkpoint, else ""
};

// What a finished step leaves for metrics.jsonl and samples.jsonl. The driver adds "step", "elapsed_s" (seconds
// since the loop started) and, with a checkpoint, "checkpoint" to the record.
struct StepRecords {
  Json record = Json::object();
  std::vector<Json> samples;
};

// What a command does per step, called in this order.
struct RunSteps {
  // The step's work, and its held-out evaluation when plan.evaluate.
  std::function<void(const StepPlan& plan)> run;
  // Writes the step's checkpoint into plan.checkpoint + ".partial" (only called when plan.checkpoint is set).
  std::function<void(const StepPlan& plan)> write_checkpoint;
  // The step's records (built on every rank; written only where the driver writes the run directory).
  std::function<StepRecords(const StepPlan& plan)> records;
  // Prints the step line; eta_s: the steps left times the mean wall time of the steps run so far (evaluation and
  // checkpoint included).
  std::function<void(const StepPlan& plan, double eta_s)> print_step_line;
};

struct RunOutputs {
  const char* command = "run";  // names the run in the stop line: "train", "sft", "dpo"
  // Where records go; both null on a data-parallel rank other than the lead, which neither writes records nor
  // checkpoints nor prints step lines. `samples` may be null alone (a command without samples).
  MetricsLog* metrics = nullptr;
  JsonlWriter* samples = nullptr;
  std::string pinned_checkpoint;  // never pruned (a split run's worker restarts from it); "" = none
  // Called after step_N is committed (its records written): a test's crash point.
  std::function<void(int64_t step)> checkpoint_committed;
  // Asked after each step's work (not after the last): true ends the run with that step's checkpoint. On a
  // data-parallel run every rank must answer alike.
  std::function<bool()> stop_requested;
};

struct DriveResult {
  int64_t steps_run = 0;
  int64_t last_step_run = 0;  // 0 when none ran
  bool stopped = false;       // ended early by stop_requested
  std::string checkpoint;     // the last checkpoint committed ("" when none)
  double seconds = 0;         // the loop's wall time
};

// A RunSteps::write_checkpoint that saves `params` as a model checkpoint (model/checkpoint.h, with `extra_files`,
// a tokenizer's, beside the weights) and, for a LoRA run, its `adapters` in adapter/ (PEFT's files): `rlcpp sft`
// and `rlcpp dpo`'s checkpoint.
std::function<void(const StepPlan& plan)> model_checkpoint_writer(const ParameterStore& params,
                                                                  std::vector<std::string> extra_files,
                                                                  const LoraAdapters* adapters = nullptr);

// Runs steps schedule.first_step .. schedule.last_step of the run in `run` (fewer when a stop is requested).
DriveResult drive_steps(const RunDir& run, const RunSchedule& schedule, const RunSteps& steps,
                        const RunOutputs& outputs);

}  // namespace rlcpp
