// The two toy environments of the agent's main jobs (configs/agent_calc.json, configs/agent_guess.json), both
// in-process, with an expert that writes the SFT warm start's demonstrations.
//
// calc: an arithmetic task's item (e.g. mul, 3 digits: "123*456=") with a calculator tool. A turn that calls it gets
// the result back (or the error); a turn without a call is the final answer, scored by the task (1 right, the
// task's format score for a well-formed wrong number, 0 otherwise). The expert calls the calculator with the
// expression and then copies its result, or, in a share of demonstrations, writes the right answer at once (which
// the model cannot learn to compute in its head: RL must learn to call the tool).
//
// guess: a hidden number in [0, 999] (task guess); each turn is a guess, answered "+" (the number is higher) or
// "-" (lower), or an error for anything but a number in [0, 999]. Finding it on turn t of at most K
// (agent.max_turns) is worth (K + 1 - t) / K, so fewer turns pay more; the binary-search bound is 10 turns. The
// expert keeps the interval the feedback leaves and guesses its middle, or, in a share of its turns, a number
// drawn uniformly inside it.
#pragma once

#include <cstdint>
#include <memory>

#include "agent/environment.h"
#include "agent/tools.h"
#include "core/philox.h"

namespace rlcpp {

class ExpertEnvironment : public Environment {
 public:
  // The demonstrator's next turn in the episode so far.
  virtual AssistantTurn expert_turn(PhiloxStream& rng) = 0;
};

// `task` must outlive the environment. `tool_share`: the expert's share of demonstrations that use the calculator.
std::unique_ptr<ExpertEnvironment> make_calc_env(const Task& task, double tool_share);
// `max_turns`: K of the reward. `bisect_share`: the expert's share of turns that guess the interval's middle.
// `interval_feedback`: a wrong guess's observation is the range left, as the prompt writes the first one
// ("(501 999)"), instead of its sign ("+" higher, "-" lower).
std::unique_ptr<ExpertEnvironment> make_guess_env(int64_t max_turns, double bisect_share,
                                                  bool interval_feedback = false);

}  // namespace rlcpp
