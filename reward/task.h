// A task generates prompts with reference answers, splits them into train and held-out test problems, and
// scores a model's response. Every task is deterministic: the same stream or eval seed gives the same problems.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/philox.h"
#include "reward/reward_result.h"

namespace rlcpp {

struct Problem {
  std::string prompt;  // the text after BOS that the model continues, e.g. "123+45="
  std::string answer;  // a reference answer (the SFT target), e.g. "168"
  Json meta;           // task-specific operands, e.g. {"a": 123, "b": 45, "op": "+"}
  uint64_t id = 0;     // unique within the task for a given prompt; keys sampling randomness
};

class Task {
 public:
  virtual ~Task() = default;

  // E.g. "add3", "sub4", "countdown", "dataset".
  virtual std::string name() const = 0;

  // A training problem (never a test one). Draws only from `rng`, so a stream position is the data cursor.
  virtual Problem sample_train(PhiloxStream& rng) const = 0;

  // The fixed held-out set: the first min(n, number of test problems) distinct test problems in the order
  // of the task's eval seed. eval_set(m) is a prefix of eval_set(n) for m <= n.
  virtual std::vector<Problem> eval_set(int64_t n) const = 0;

  virtual bool is_test(const Problem& problem) const = 0;

  // Scores `response`: the decoded text before the first EOS (arbitrary bytes; unknown ids decode as '?').
  // `terminated` is true when the model emitted EOS, false when generation hit the token limit.
  virtual RewardResult score(const Problem& problem, const std::string& response, bool terminated) const = 0;

  // A generation limit that fits every reference answer plus EOS (add3: 6).
  virtual int64_t max_new_tokens() const = 0;

  // Every character a prompt or reference answer can contain, so a tokenizer mismatch fails at startup.
  // "" means free text (any bytes: English prompts, worked solutions): only a tokenizer that encodes any text
  // (byte-level BPE, task.charset "") can run the task, and make_task refuses it under a non-empty charset.
  virtual std::string alphabet() const = 0;

  // A label grouping problems for per-class accuracy (`rlcpp eval` prints one line per class), e.g. the
  // operands' digit counts "3+2" of add3; "" (the default) when the task has no classes.
  virtual std::string problem_class(const Problem& /*problem*/) const { return ""; }
  // Fails, naming the problem's source, when a prompt (character tokens after BOS) plus `max_new_tokens`
  // cannot fit in a model context of `context` tokens: checked when a run starts, not when a batch draws it.
  // Generated tasks' prompts are a few characters; a dataset checks every line.
  virtual void check_fits(int64_t /*context*/, int64_t /*max_new_tokens*/) const {}
};

}  // namespace rlcpp
