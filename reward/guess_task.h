// The guess task's problems: a hidden number in [0, 999] that an episode finds from higher/lower feedback
// (agent/guess_env.h plays it). Prompt "(0 999)", answer the number, meta {"secret", "max"}; id and split key the
// number itself, so 100 of the 1,000 numbers are held out (splitmix64(n) % 10 == 0). Scored alone, a response is
// one guess: 1 when it is the number, then EOS, else 0 (the environment scores an episode by its turns).
#pragma once

#include <cstdint>

#include "reward/task.h"

namespace rlcpp {

class GuessTask final : public Task {
 public:
  static constexpr int64_t kMax = 999;

  explicit GuessTask(uint64_t eval_seed) : eval_seed_(eval_seed) {}
  std::string name() const override { return "guess"; }
  Problem sample_train(PhiloxStream& rng) const override;
  std::vector<Problem> eval_set(int64_t n) const override;
  bool is_test(const Problem& problem) const override;
  RewardResult score(const Problem& problem, const std::string& response, bool terminated) const override;
  int64_t max_new_tokens() const override { return 4; }  // three digits and EOS
  std::string alphabet() const override { return "0123456789() "; }

  static Problem make_problem(int64_t secret);
  // The hidden number of a problem; errors name the problem.
  static int64_t secret_of(const Problem& problem);

 private:
  uint64_t eval_seed_;
};

}  // namespace rlcpp
