#include "reward/arithmetic_task.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "reward/split_hash.h"

namespace rlcpp {
namespace {

// Philox stream id of the held-out set; training streams come from the caller.
constexpr uint64_t kEvalStream = 0x6576616c;  // "eval"
// Past this eval size the distinct-pair draw below would need an unreasonable amount of memory and time.
constexpr int64_t kMaxEvalSize = 10'000'000;

}  // namespace

ArithmeticTask::ArithmeticTask(ArithmeticOp op, int64_t digits, uint64_t eval_seed, ScorerSpec scorer,
                               OperandSampling sampling)
    : op_(op), digits_(digits), base_(1), eval_seed_(eval_seed), scorer_(scorer), sampling_(sampling) {
  RLCPP_CHECK(digits >= 1 && digits <= 9, "config key 'task.digits': " << digits << " is not in [1, 9]");
  RLCPP_CHECK(scorer.kind != ScorerKind::kNumeric || scorer.tolerance >= 0.0,
              "config key 'task.tolerance': " << scorer.tolerance << " is negative");
  for (int64_t i = 0; i < digits; ++i) base_ *= 10;
  scorer_.allow_negative = op == ArithmeticOp::kSub;
}

char ArithmeticTask::op_char() const {
  switch (op_) {
    case ArithmeticOp::kAdd: return '+';
    case ArithmeticOp::kSub: return '-';
    case ArithmeticOp::kMul: return '*';
  }
  return '?';
}

std::string ArithmeticTask::name() const {
  const char* op = op_ == ArithmeticOp::kAdd ? "add" : op_ == ArithmeticOp::kSub ? "sub" : "mul";
  return op + std::to_string(digits_);
}

Problem ArithmeticTask::make_problem(uint64_t a, uint64_t b) const {
  RLCPP_CHECK(a < base_ && b < base_, "operands " << a << ", " << b << " do not have at most " << digits_
                                                  << " digits");
  Problem p;
  p.prompt = std::to_string(a) + op_char() + std::to_string(b) + "=";
  switch (op_) {
    case ArithmeticOp::kAdd: p.answer = std::to_string(a + b); break;
    case ArithmeticOp::kSub: p.answer = std::to_string(static_cast<int64_t>(a) - static_cast<int64_t>(b)); break;
    case ArithmeticOp::kMul: p.answer = std::to_string(a * b); break;
  }
  p.meta = Json{{"a", a}, {"b", b}, {"op", std::string(1, op_char())}};
  p.id = split_key(a, b);
  return p;
}

std::string ArithmeticTask::problem_class(const Problem& problem) const {
  RLCPP_CHECK(problem.meta.contains("a") && problem.meta.contains("b"),
              "problem '" << problem.prompt << "' has no operands in its meta (" << problem.meta.dump() << ")");
  return std::to_string(std::to_string(problem.meta["a"].get<uint64_t>()).size()) + op_char() +
         std::to_string(std::to_string(problem.meta["b"].get<uint64_t>()).size());
}

uint64_t ArithmeticTask::draw_operand(PhiloxStream& rng) const {
  if (sampling_ == OperandSampling::kUniform) return rng.below(base_);
  // Numbers of `length` digits are [10^(length-1), 10^length), and 0..9 for one digit.
  const int64_t length = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(digits_)));
  uint64_t high = 10;
  for (int64_t i = 1; i < length; ++i) high *= 10;
  const uint64_t low = length == 1 ? 0 : high / 10;
  return low + rng.below(high - low);
}

Problem ArithmeticTask::sample_train(PhiloxStream& rng) const {
  // Rejection keeps training pairs distributed as drawn over the train split; about 1 draw in 10 is rejected.
  while (true) {
    uint64_t a = draw_operand(rng);
    uint64_t b = draw_operand(rng);
    if (!is_test_key(split_key(a, b))) return make_problem(a, b);
  }
}

int64_t ArithmeticTask::count_test_pairs() const {
  int64_t count = 0;
  for (uint64_t key = 0; key < base_ * base_; ++key) count += is_test_key(key) ? 1 : 0;
  return count;
}

std::vector<Problem> ArithmeticTask::eval_set(int64_t n) const {
  RLCPP_CHECK(n >= 0 && n <= kMaxEvalSize, "eval set size " << n << " is not in [0, " << kMaxEvalSize << "]");
  // Up to 3 digits the pair space is at most 10^6 and the test split is counted exactly, so a request larger
  // than the split returns all of it; from 4 digits on the split has about 10^7 pairs or more.
  if (digits_ <= 3) n = std::min(n, count_test_pairs());
  PhiloxStream rng(eval_seed_, kEvalStream);
  std::unordered_set<uint64_t> seen;
  std::vector<Problem> out;
  out.reserve(n);
  while (static_cast<int64_t>(out.size()) < n) {
    uint64_t a = rng.below(base_);
    uint64_t b = rng.below(base_);
    uint64_t key = split_key(a, b);
    if (is_test_key(key) && seen.insert(key).second) out.push_back(make_problem(a, b));
  }
  return out;
}

bool ArithmeticTask::is_test(const Problem& problem) const {
  const Json& m = problem.meta;
  RLCPP_CHECK(m.is_object() && m.contains("a") && m.contains("b") && m["a"].is_number_unsigned() &&
                  m["b"].is_number_unsigned(),
              "task " << name() << ": problem '" << problem.prompt << "' lacks operands a, b in its meta "
                      << m.dump());
  return is_test_key(split_key(m["a"].get<uint64_t>(), m["b"].get<uint64_t>()));
}

RewardResult ArithmeticTask::score(const Problem& problem, const std::string& response, bool terminated) const {
  return score_answer(scorer_, problem.answer, response, terminated);
}

int64_t ArithmeticTask::max_new_tokens() const {
  // The longest answer (add: digits + 1 carry; sub: "-" + digits; mul: 2 * digits) plus EOS plus one spare,
  // which gives add3 its 6.
  int64_t longest = op_ == ArithmeticOp::kMul ? 2 * digits_ : digits_ + 1;
  return longest + 2;
}

std::string ArithmeticTask::alphabet() const { return std::string("0123456789=") + op_char(); }

}  // namespace rlcpp
