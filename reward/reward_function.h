// The one call the controller makes in its reward phase, whether the task scores locally or a server does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "reward/overlong_penalty.h"
#include "reward/remote_reward.h"
#include "reward/task.h"

namespace rlcpp {

struct RewardConfig {
  std::string type = "local";
  RemoteRewardConfig remote;
  OverlongBufferConfig overlong_buffer;  // applied by the controller on top of either (it knows the lengths)

  template <class V> void visit(V& v) {
    v("type", type, "local (the task's scorer) | remote (a reward server, see reward/README.md)");
    v("remote", remote, "reward server settings, used when type is remote");
    v("overlong_buffer", overlong_buffer, "DAPO's soft overlong punishment (reward/overlong_penalty.h)");
  }
  // reward.type and, for a remote one, reward.remote.* (RemoteRewardConfig::validate): before any work.
  void validate() const;
};

struct RewardQuery {
  const Problem* problem = nullptr;
  std::string response;  // decoded text before EOS
  bool terminated = false;
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;
  // One result per query, in order.
  virtual std::vector<RewardResult> score(const std::vector<RewardQuery>& queries) = 0;
  // Cumulative counters for the metrics log ({} for local scoring).
  virtual Json counters() const = 0;
};

// `task` must outlive the returned function. Errors name reward.type or reward.remote.* keys.
std::unique_ptr<RewardFunction> make_reward_function(const RewardConfig& cfg, const Task& task);

}  // namespace rlcpp
