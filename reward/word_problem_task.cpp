#include "reward/word_problem_task.h"

#include <unordered_set>

#include "core/error.h"
#include "reward/split_hash.h"
#include "reward/word_problems.h"

namespace rlcpp {
namespace {

constexpr uint64_t kEvalStream = 0x6576616c;  // "eval"
// The templates' number ranges give millions of distinct keys (the smallest template, rate, 4,536), so
// hundreds of thousands of test problems; the draw limit only stops a broken generator.
constexpr int64_t kMaxEvalSize = 100'000;
constexpr int64_t kMaxEvalDraws = 100 * kMaxEvalSize;

}  // namespace

WordProblemTask::WordProblemTask(uint64_t eval_seed, ScorerSpec scorer) : eval_seed_(eval_seed), scorer_(scorer) {
  RLCPP_CHECK(scorer.kind == ScorerKind::kMath || scorer.kind == ScorerKind::kFormat || scorer.kind == ScorerKind::kExact,
              "config key 'task.scorer': words takes \"math\" (or \"format\", the same) or \"exact\" (no format credit), "
              "got \"" << scorer_kind_name(scorer.kind) << "\"");
  if (scorer_.kind == ScorerKind::kExact) scorer_.format_score = 0.0;
  scorer_.kind = ScorerKind::kMath;
}

Problem WordProblemTask::draw(PhiloxStream& rng) const {
  WordProblem w = draw_word_problem(rng);
  Problem p;
  p.prompt = w.question + "\n" + kInstruction + "\n";
  p.answer = w.solution;
  p.meta = Json{{"template", w.template_name}, {"numbers", w.numbers}, {"steps", w.steps}};
  p.id = fnv1a64(p.prompt);
  RLCPP_CHECK(static_cast<int64_t>(p.prompt.size()) <= kMaxPromptBytes,
              "words: a " << w.template_name << " prompt of " << p.prompt.size() << " bytes is past kMaxPromptBytes "
                          << kMaxPromptBytes);
  return p;
}

uint64_t WordProblemTask::split_key(const Problem& problem) {
  const Json& m = problem.meta;
  RLCPP_CHECK(m.is_object() && m.contains("template") && m["template"].is_string() && m.contains("numbers") &&
                  m["numbers"].is_array(),
              "words problem lacks template/numbers in its meta " << m.dump());
  std::vector<int64_t> numbers;
  for (const Json& x : m["numbers"]) {
    RLCPP_CHECK(x.is_number_integer(), "words problem: number " << x.dump() << " is not an integer");
    numbers.push_back(x.get<int64_t>());
  }
  return word_problem_key(m["template"].get<std::string>(), numbers);
}

Problem WordProblemTask::sample_train(PhiloxStream& rng) const {
  while (true) {
    Problem p = draw(rng);
    if (!is_test(p)) return p;
  }
}

std::vector<Problem> WordProblemTask::eval_set(int64_t n) const {
  RLCPP_CHECK(n >= 0 && n <= kMaxEvalSize, "eval set size " << n << " is not in [0, " << kMaxEvalSize << "]");
  PhiloxStream rng(eval_seed_, kEvalStream);
  std::unordered_set<uint64_t> seen;
  std::vector<Problem> out;
  for (int64_t draws = 0; static_cast<int64_t>(out.size()) < n; ++draws) {
    RLCPP_CHECK(draws < kMaxEvalDraws, "words: only " << out.size() << " distinct test problems in " << draws << " draws");
    Problem p = draw(rng);
    uint64_t key = split_key(p);
    if (is_test_key(key) && seen.insert(key).second) out.push_back(std::move(p));
  }
  return out;
}

bool WordProblemTask::is_test(const Problem& problem) const { return is_test_key(split_key(problem)); }

RewardResult WordProblemTask::score(const Problem& problem, const std::string& response, bool terminated) const {
  return score_math(problem.answer, response, terminated, scorer_.format_score);
}

std::string WordProblemTask::problem_class(const Problem& problem) const {
  const Json& m = problem.meta;
  return m.is_object() && m.contains("template") && m["template"].is_string() ? m["template"].get<std::string>() : "";
}

void WordProblemTask::check_fits(int64_t context, int64_t max_new_tokens) const {
  const int64_t need = 1 + kMaxPromptBytes + max_new_tokens;
  RLCPP_CHECK(need <= context, "task 'words': a prompt of up to " << kMaxPromptBytes << " bytes + BOS + "
                                                                  << max_new_tokens << " new tokens needs " << need
                                                                  << " positions, more than the model's context of "
                                                                  << context);
}

}  // namespace rlcpp
