#include "reward/guess_task.h"

#include <unordered_set>

#include "core/error.h"
#include "reward/scorers.h"
#include "reward/split_hash.h"

namespace rlcpp {

namespace {
constexpr uint64_t kEvalStream = 0x6576616c;  // "eval", as the other tasks' held-out draws
}

Problem GuessTask::make_problem(int64_t secret) {
  RLCPP_CHECK(secret >= 0 && secret <= kMax, "guess: the hidden number " << secret << " is not in [0, " << kMax << "]");
  Problem p;
  p.prompt = "(0 " + std::to_string(kMax) + ")";
  p.answer = std::to_string(secret);
  p.meta = Json{{"secret", secret}, {"max", kMax}};
  p.id = static_cast<uint64_t>(secret);
  return p;
}

int64_t GuessTask::secret_of(const Problem& problem) {
  const Json& m = problem.meta;
  RLCPP_CHECK(m.is_object() && m.contains("secret") && m["secret"].is_number_integer(),
              "guess: problem '" << problem.prompt << "' has no hidden number in its meta " << m.dump());
  const int64_t secret = m["secret"].get<int64_t>();
  RLCPP_CHECK(secret >= 0 && secret <= kMax, "guess: the hidden number " << secret << " is not in [0, " << kMax << "]");
  return secret;
}

Problem GuessTask::sample_train(PhiloxStream& rng) const {
  while (true) {
    const int64_t secret = static_cast<int64_t>(rng.below(kMax + 1));
    if (!is_test_key(static_cast<uint64_t>(secret))) return make_problem(secret);
  }
}

std::vector<Problem> GuessTask::eval_set(int64_t n) const {
  int64_t held_out = 0;
  for (int64_t s = 0; s <= kMax; ++s) held_out += is_test_key(static_cast<uint64_t>(s)) ? 1 : 0;
  n = std::max<int64_t>(0, std::min(n, held_out));
  PhiloxStream rng(eval_seed_, kEvalStream);
  std::unordered_set<int64_t> seen;
  std::vector<Problem> out;
  while (static_cast<int64_t>(out.size()) < n) {
    const int64_t secret = static_cast<int64_t>(rng.below(kMax + 1));
    if (is_test_key(static_cast<uint64_t>(secret)) && seen.insert(secret).second) out.push_back(make_problem(secret));
  }
  return out;
}

bool GuessTask::is_test(const Problem& problem) const {
  return is_test_key(static_cast<uint64_t>(secret_of(problem)));
}

RewardResult GuessTask::score(const Problem& problem, const std::string& response, bool terminated) const {
  return score_exact(problem.answer, response, terminated);
}

}  // namespace rlcpp
