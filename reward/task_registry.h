// Builds the task a TaskConfig names and checks it against the tokenizer's charset.
#pragma once

#include <memory>

#include "core/philox.h"
#include "reward/scorers.h"
#include "reward/task.h"
#include "reward/task_config.h"

namespace rlcpp {

// Errors name the config key ("task.name", "task.digits", "task.scorer", ...), the bad value and what was
// expected; a prompt or answer character outside task.charset is an error too.
std::unique_ptr<Task> make_task(const TaskConfig& cfg);

// The training problem stream of task.seed (Philox stream "trai"); its position is the data cursor a
// checkpoint saves.
PhiloxStream make_train_stream(const TaskConfig& cfg);

ScorerSpec make_scorer_spec(const TaskConfig& cfg);

}  // namespace rlcpp
