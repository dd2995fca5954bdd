// What a scorer returns for one response: the scalar the trainer optimises plus named parts for the logs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace rlcpp {

// The largest |total| a run learns from. The trainer holds rewards in fp32, sums them over tokens and squares
// returns in a critic's loss, so a reward of 1e308 (or 1e30) makes the step's loss non-finite; no reward scale in
// use comes near a billion, so a larger one is taken for a broken scorer and named, not trained on.
constexpr double kMaxRewardMagnitude = 1e9;

struct RewardResult {
  double total = 0.0;
  // Named diagnostics, e.g. {"correct", 1}, {"well_formed", 1}, {"terminated", 1}. They are not required to
  // sum to `total`; the built-in scorers always emit the same names so their means can be logged per step.
  std::vector<std::pair<std::string, double>> components;
  bool correct = false;
};

// {"total": .., "correct": .., "components": {name: value}} for samples.jsonl.
Json reward_to_json(const RewardResult& r);

// Per-component mean over a batch, in order of first appearance; a component missing from a result counts
// as absent (the mean is over the results that have it). Adds "total" and "correct" (fraction) first.
std::vector<std::pair<std::string, double>> mean_reward_components(const std::vector<RewardResult>& results);

}  // namespace rlcpp
