// The `words` task: generated GSM8K-style word problems (word_problems.h) in English, scored by extracting
// the final answer (the math scorer). The prompt is the question and then an instruction to end with
// "#### N"; the reference answer is a short worked solution whose last line is "#### N".
//
// Split key: word_problem_key(template, numbers), so a problem's test membership depends only on its template
// and numbers, never on the names or objects in it. It is free text: alphabet() is "" and the task needs a
// tokenizer that encodes any text (a checkpoint with a tokenizer.json).
#pragma once

#include <cstdint>

#include "reward/scorers.h"
#include "reward/task.h"

namespace rlcpp {

class WordProblemTask : public Task {
 public:
  // The instruction line after every question.
  static constexpr const char* kInstruction = "Show your work, then write the final answer on its own line as \"#### N\".";
  // Longest prompt in bytes (questions and instruction are bounded by their templates; checked at each draw).
  static constexpr int64_t kMaxPromptBytes = 400;
  static constexpr int64_t kMaxNewTokens = 256;

  // scorer: kMath or kFormat (the math scorer with format_score for a marked wrong answer) or kExact (the math
  // scorer without format credit).
  WordProblemTask(uint64_t eval_seed, ScorerSpec scorer);

  std::string name() const override { return "words"; }
  Problem sample_train(PhiloxStream& rng) const override;
  std::vector<Problem> eval_set(int64_t n) const override;
  bool is_test(const Problem& problem) const override;
  RewardResult score(const Problem& problem, const std::string& response, bool terminated) const override;
  // Room for a worked solution in BPE tokens: references are at most 173 bytes, about 70 tokens of a
  // Qwen-style tokenizer (digits split), so a model's own longer reasoning fits too.
  int64_t max_new_tokens() const override { return kMaxNewTokens; }
  std::string alphabet() const override { return ""; }  // any text
  // The template name: "shopping", "ages", ...
  std::string problem_class(const Problem& problem) const override;
  // One token per prompt byte bounds any byte-level tokenizer's count from above.
  void check_fits(int64_t context, int64_t max_new_tokens) const override;

  // A problem in either split, drawn from `rng`.
  Problem draw(PhiloxStream& rng) const;
  static uint64_t split_key(const Problem& problem);

 private:
  uint64_t eval_seed_;
  ScorerSpec scorer_;
};

}  // namespace rlcpp
