#include "reward/task_registry.h"

#include "core/error.h"
#include "reward/arithmetic_task.h"
#include "reward/countdown_task.h"
#include "reward/dataset_task.h"
#include "reward/guess_task.h"
#include "reward/word_problem_task.h"

namespace rlcpp {
namespace {

constexpr uint64_t kTrainStream = 0x74726169;  // "trai"

}  // namespace

ScorerSpec make_scorer_spec(const TaskConfig& cfg) {
  ScorerSpec spec;
  spec.kind = parse_scorer_kind(cfg.scorer, "task.scorer");
  RLCPP_CHECK(cfg.format_score >= 0.0 && cfg.format_score <= 1.0,
              "config key 'task.format_score': " << cfg.format_score << " is not in [0, 1]");
  RLCPP_CHECK(cfg.tolerance >= 0.0, "config key 'task.tolerance': " << cfg.tolerance << " is negative");
  spec.format_score = cfg.format_score;
  spec.tolerance = cfg.tolerance;
  return spec;
}

OperandSampling operand_sampling(const TaskConfig& cfg) {
  if (cfg.operands == "uniform") return OperandSampling::kUniform;
  if (cfg.operands == "length-balanced") return OperandSampling::kLengthBalanced;
  RLCPP_FAIL("config key 'task.operands': unknown value '" << cfg.operands
                                                           << "' (expected \"uniform\" or \"length-balanced\")");
}

std::unique_ptr<Task> make_task(const TaskConfig& cfg) {
  ScorerSpec spec = make_scorer_spec(cfg);
  const bool arithmetic = cfg.name == "add3" || cfg.name == "add" || cfg.name == "sub" || cfg.name == "mul";
  RLCPP_CHECK(arithmetic || cfg.operands == "uniform",
              "config key 'task.operands': '" << cfg.operands << "' applies to add3/add/sub/mul, not task '"
                                              << cfg.name << "'");
  const OperandSampling sampling = arithmetic ? operand_sampling(cfg) : OperandSampling::kUniform;
  RLCPP_CHECK(cfg.eval_size >= 0, "config key 'task.eval_size': " << cfg.eval_size << " is negative");
  uint64_t eval_seed = static_cast<uint64_t>(cfg.eval_seed);
  std::unique_ptr<Task> task;
  if (cfg.name == "add3") {
    RLCPP_CHECK(cfg.digits == 3, "config key 'task.digits': task 'add3' is add with 3 digits, got digits "
                                     << cfg.digits << " (use task.name \"add\" for other widths)");
    task = std::make_unique<ArithmeticTask>(ArithmeticOp::kAdd, 3, eval_seed, spec, sampling);
  } else if (cfg.name == "add") {
    task = std::make_unique<ArithmeticTask>(ArithmeticOp::kAdd, cfg.digits, eval_seed, spec, sampling);
  } else if (cfg.name == "sub") {
    task = std::make_unique<ArithmeticTask>(ArithmeticOp::kSub, cfg.digits, eval_seed, spec, sampling);
  } else if (cfg.name == "mul") {
    task = std::make_unique<ArithmeticTask>(ArithmeticOp::kMul, cfg.digits, eval_seed, spec, sampling);
  } else if (cfg.name == "countdown") {
    task = std::make_unique<CountdownTask>(eval_seed, spec);
  } else if (cfg.name == "countdown_words") {
    task = std::make_unique<CountdownTask>(eval_seed, spec, CountdownStyle::kWords);
  } else if (cfg.name == "words") {
    task = std::make_unique<WordProblemTask>(eval_seed, spec);
  } else if (cfg.name == "guess") {
    task = std::make_unique<GuessTask>(eval_seed);
  } else if (cfg.name == "dataset") {
    task = std::make_unique<DatasetTask>(cfg.path, cfg.test_path, cfg.charset, eval_seed, spec);
  } else {
    RLCPP_FAIL("config key 'task.name': unknown task '"
               << cfg.name << "' (expected add3, add, sub, mul, countdown, countdown_words, words, guess or dataset)");
  }
  // alphabet() "" is free text: no character set short of "any text" can encode it.
  RLCPP_CHECK(cfg.charset.empty() || !task->alphabet().empty(),
              "config key 'task.charset': task '"
                  << task->name() << "' writes English text (letters, punctuation, newlines), which the charset \""
                  << cfg.charset << "\" (the character tokenizer's by default) cannot encode; it needs a model "
                  << "checkpoint with a tokenizer.json (byte-level BPE) and task.charset set to \"\" (any text)");
  if (!cfg.charset.empty()) {
    for (char c : task->alphabet()) {
      RLCPP_CHECK(cfg.charset.find(c) != std::string::npos,
                  "config key 'task.charset': task '" << task->name() << "' writes '" << c
                                                      << "', which the charset \"" << cfg.charset << "\" lacks");
    }
  }
  return task;
}

PhiloxStream make_train_stream(const TaskConfig& cfg) {
  return PhiloxStream(static_cast<uint64_t>(cfg.seed), kTrainStream);
}

}  // namespace rlcpp
