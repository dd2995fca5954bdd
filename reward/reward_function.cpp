#include "reward/reward_function.h"

#include "core/error.h"

namespace rlcpp {
namespace {

class LocalReward : public RewardFunction {
 public:
  explicit LocalReward(const Task& task) : task_(task) {}
  std::vector<RewardResult> score(const std::vector<RewardQuery>& queries) override {
    std::vector<RewardResult> out;
    out.reserve(queries.size());
    for (const RewardQuery& q : queries) {
      RLCPP_CHECK(q.problem != nullptr, "reward query without a problem");
      out.push_back(task_.score(*q.problem, q.response, q.terminated));
    }
    return out;
  }
  Json counters() const override { return Json::object(); }

 private:
  const Task& task_;
};

class RemoteReward : public RewardFunction {
 public:
  explicit RemoteReward(const RemoteRewardConfig& cfg) : client_(cfg) {}
  std::vector<RewardResult> score(const std::vector<RewardQuery>& queries) override {
    std::vector<RemoteRequest> requests;
    requests.reserve(queries.size());
    for (const RewardQuery& q : queries) {
      RLCPP_CHECK(q.problem != nullptr, "reward query without a problem");
      requests.push_back(make_remote_request(*q.problem, q.response, q.terminated));
    }
    return client_.score(requests);
  }
  Json counters() const override { return client_.counters_json(); }

 private:
  RemoteRewardClient client_;
};

}  // namespace

void RewardConfig::validate() const {
  RLCPP_CHECK(type == "local" || type == "remote",
              "config key 'reward.type': \"" << type << "\", expected \"local\" or \"remote\"");
  if (type == "remote") remote.validate("reward.remote");
}

std::unique_ptr<RewardFunction> make_reward_function(const RewardConfig& cfg, const Task& task) {
  cfg.validate();
  if (cfg.type == "remote") return std::make_unique<RemoteReward>(cfg.remote);
  return std::make_unique<LocalReward>(task);
}

}  // namespace rlcpp
