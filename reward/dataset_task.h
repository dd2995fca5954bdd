// A task read from JSONL: one {"prompt": "...", "answer": "..."} per line, with an optional "meta" object.
// Every line is validated when the task is built; an error names the file, the line and what is wrong, and a
// character the tokenizer cannot encode is named with its code point.
//
// Split: with a test file, the training file is the train split and the test file the test split (a prompt in
// both is an error). Without one, a prompt is a test problem iff splitmix64(fnv1a64(prompt)) % 10 == 0.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "reward/scorers.h"
#include "reward/task.h"

namespace rlcpp {

// Reads and validates a JSONL problem file. `charset` lists the characters the tokenizer encodes ("" skips
// the check); every answer must suit `scorer` (see answer_mismatch). Blank lines are skipped; line numbers
// count them. Problem ids are fnv1a64(prompt); meta is the line's "meta" object plus "line".
std::vector<Problem> load_jsonl_problems(const std::string& path, const std::string& charset,
                                         const ScorerSpec& scorer);

class DatasetTask : public Task {
 public:
  // The format scorer here admits negative integers as well-formed.
  DatasetTask(const std::string& path, const std::string& test_path, const std::string& charset,
              uint64_t eval_seed, ScorerSpec scorer);

  std::string name() const override { return "dataset"; }
  Problem sample_train(PhiloxStream& rng) const override;
  // A seeded shuffle of the test problems, so eval_set(m) is a prefix of eval_set(n).
  std::vector<Problem> eval_set(int64_t n) const override;
  bool is_test(const Problem& problem) const override;
  RewardResult score(const Problem& problem, const std::string& response, bool terminated) const override;
  // Longest reference answer in bytes plus EOS plus one spare.
  int64_t max_new_tokens() const override;
  std::string alphabet() const override;
  void check_fits(int64_t context, int64_t max_new_tokens) const override;

  int64_t train_size() const { return static_cast<int64_t>(train_.size()); }
  int64_t test_size() const { return static_cast<int64_t>(test_.size()); }

 private:
  std::string path_, test_path_;
  bool separate_test_file_;
  uint64_t eval_seed_;
  ScorerSpec scorer_;
  std::vector<Problem> train_;
  std::vector<Problem> test_;
  std::unordered_set<std::string> test_prompts_;
};

}  // namespace rlcpp
