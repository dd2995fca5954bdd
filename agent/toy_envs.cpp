#include "agent/toy_envs.h"

#include <algorithm>

#include "core/error.h"
#include "reward/guess_task.h"

namespace rlcpp {

namespace {

class CalcEnvironment final : public ExpertEnvironment {
 public:
  CalcEnvironment(const Task& task, double tool_share) : task_(task), tool_share_(tool_share) {
    tools_.add(calculator_spec(), calculator);
  }

  std::string reset(const Problem& item) override {
    problem_ = item;
    last_result_.clear();
    return item.prompt;
  }

  EnvStep step(const AssistantTurn& turn) override {
    if (!turn.tool_calls.empty() || !turn.parse_error.empty()) {
      EnvStep s = tools_.run(turn);
      if (!s.error) last_result_ = s.observation;
      return s;
    }
    const RewardResult r = task_.score(problem_, turn.text, turn.ended);
    EnvStep s;
    s.reward = r.total;
    s.done = true;
    s.success = r.correct;
    return s;
  }

  std::vector<ToolSpec> tools() const override { return tools_.specs(); }

  AssistantTurn expert_turn(PhiloxStream& rng) override {
    AssistantTurn t;
    if (!last_result_.empty()) {  // the calculator answered: copy it
      t.text = last_result_;
      return t;
    }
    if (rng.uniform() >= tool_share_) {  // answer at once
      t.text = problem_.answer;
      return t;
    }
    std::string expression = problem_.prompt;
    if (!expression.empty() && expression.back() == '=') expression.pop_back();
    ToolCall call;
    call.name = "calculator";
    call.arguments["expression"] = expression;
    t.tool_calls.push_back(call);
    return t;
  }

 private:
  const Task& task_;
  double tool_share_;
  ToolBox tools_;
  Problem problem_;
  std::string last_result_;
};

// A canonical decimal number in [0, max]: digits, no sign, no leading zero (but "0").
bool parse_guess(const std::string& text, int64_t max, int64_t& value) {
  if (text.empty() || text.size() > 18 || (text.size() > 1 && text[0] == '0')) return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  return value <= max;
}

class GuessEnvironment final : public ExpertEnvironment {
 public:
  GuessEnvironment(int64_t max_turns, double bisect_share, bool interval_feedback)
      : max_turns_(max_turns), bisect_share_(bisect_share), interval_feedback_(interval_feedback) {
    RLCPP_CHECK(max_turns >= 1, "guess: max_turns must be >= 1, got " << max_turns);
  }

  std::string reset(const Problem& item) override {
    secret_ = GuessTask::secret_of(item);
    low_ = 0;
    high_ = GuessTask::kMax;
    turns_ = 0;
    return item.prompt;
  }

  EnvStep step(const AssistantTurn& turn) override {
    ++turns_;
    EnvStep s;
    int64_t guess = 0;
    if (!turn.parse_error.empty() || !turn.tool_calls.empty() ||
        !parse_guess(turn.text, GuessTask::kMax, guess)) {
      s.error = true;
      s.observation = "guess a whole number in [0, " + std::to_string(GuessTask::kMax) + "]";
      return s;
    }
    if (guess == secret_) {
      s.done = true;
      s.success = true;
      s.reward = static_cast<double>(max_turns_ + 1 - std::min(turns_, max_turns_)) / static_cast<double>(max_turns_);
      return s;
    }
    if (guess < secret_) low_ = std::max(low_, guess + 1);
    if (guess > secret_) high_ = std::min(high_, guess - 1);
    // The sign, or the range left written as the prompt writes [0, 999].
    s.observation = interval_feedback_ ? "(" + std::to_string(low_) + " " + std::to_string(high_) + ")"
                                       : std::string(guess < secret_ ? "+" : "-");
    return s;
  }

  AssistantTurn expert_turn(PhiloxStream& rng) override {
    const int64_t pick = rng.uniform() < bisect_share_
                             ? (low_ + high_) / 2
                             : low_ + static_cast<int64_t>(rng.below(static_cast<uint64_t>(high_ - low_ + 1)));
    AssistantTurn t;
    t.text = std::to_string(pick);
    return t;
  }

 private:
  int64_t max_turns_;
  double bisect_share_;
  bool interval_feedback_;
  int64_t secret_ = 0, low_ = 0, high_ = GuessTask::kMax, turns_ = 0;
};

}  // namespace

std::unique_ptr<ExpertEnvironment> make_calc_env(const Task& task, double tool_share) {
  return std::make_unique<CalcEnvironment>(task, tool_share);
}

std::unique_ptr<ExpertEnvironment> make_guess_env(int64_t max_turns, double bisect_share, bool interval_feedback) {
  return std::make_unique<GuessEnvironment>(max_turns, bisect_share, interval_feedback);
}

}  // namespace rlcpp
