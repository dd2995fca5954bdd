#include "loop/run_driver.h"

#include <cstdio>

#include "core/error.h"
#include "loop/train_checkpoint.h"
#include "model/checkpoint.h"

namespace rlcpp {

namespace {

// Every `period` steps (0: never), and always at the last.
bool due(int64_t step, int64_t period, bool last) { return last || (period > 0 && step % period == 0); }

}  // namespace

std::function<void(const StepPlan& plan)> model_checkpoint_writer(const ParameterStore& params,
                                                                  std::vector<std::string> extra_files,
                                                                  const LoraAdapters* adapters) {
  return [&params, files = std::move(extra_files), adapters](const StepPlan& plan) {
    save_model_checkpoint(plan.checkpoint + ".partial", params, /*overwrite=*/false, files);
    if (adapters) adapters->save_peft(plan.checkpoint + ".partial/adapter");
  };
}

DriveResult drive_steps(const RunDir& run, const RunSchedule& schedule, const RunSteps& steps,
                        const RunOutputs& outputs) {
  RLCPP_CHECK(steps.run && steps.write_checkpoint && steps.records && steps.print_step_line,
              "drive_steps: every callback of RunSteps must be set");
  RLCPP_CHECK(schedule.first_step >= 1 && schedule.log_every >= 1,
              "drive_steps: first_step and log_every must be >= 1, got " << schedule.first_step << " and "
                                                                         << schedule.log_every);
  const bool writes = outputs.metrics != nullptr;
  DriveResult result;
  Stopwatch wall;
  double step_seconds_total = 0;
  for (int64_t step = schedule.first_step; step <= schedule.last_step; ++step) {
    Stopwatch step_watch;
    StepPlan plan;
    plan.step = step;
    plan.last = step == schedule.last_step;
    plan.evaluate = due(step, schedule.eval_every, plan.last);
    steps.run(plan);
    const bool stop = !plan.last && outputs.stop_requested && outputs.stop_requested();
    if (writes && (stop || due(step, schedule.checkpoint_every, plan.last))) {
      plan.checkpoint = run.checkpoint_dir(step);
      steps.write_checkpoint(plan);  // as step_N.partial: committed below, after the step's records
    }
    StepRecords records = steps.records(plan);
    step_seconds_total += step_watch.seconds();
    ++result.steps_run;
    result.last_step_run = step;
    if (writes) {
      records.record["step"] = step;
      records.record["elapsed_s"] = wall.seconds();
      if (!plan.checkpoint.empty()) records.record["checkpoint"] = plan.checkpoint;
      // The step's records, then its checkpoint's rename: a crash between them leaves records past the newest
      // complete checkpoint, which a resume drops and writes again, never a checkpoint whose step has none.
      outputs.metrics->write(records.record);
      if (outputs.samples)
        for (const Json& s : records.samples) outputs.samples->write(s);
      if (!plan.checkpoint.empty()) {
        commit_train_checkpoint(plan.checkpoint);
        prune_checkpoints(run.path(), schedule.checkpoint_keep_last, outputs.pinned_checkpoint);
        result.checkpoint = plan.checkpoint;
        if (outputs.checkpoint_committed) outputs.checkpoint_committed(step);
      }
      if (step % schedule.log_every == 0 || step == 1 || plan.last) {
        const double seconds_per_step = step_seconds_total / static_cast<double>(result.steps_run);
        steps.print_step_line(plan, seconds_per_step * static_cast<double>(schedule.last_step - step));
      }
      std::fflush(stdout);
    }
    if (stop) {
      result.stopped = true;
      if (writes)
        std::printf("%s: stopped on request after step %lld of %lld; checkpoint %s\n", outputs.command,
                    static_cast<long long>(step), static_cast<long long>(schedule.last_step),
                    result.checkpoint.c_str());
      break;
    }
  }
  result.seconds = wall.seconds();
  return result;
}

}  // namespace rlcpp
