// Makes each episode's environment from the run's agent config: calc and guess in-process (agent/toy_envs.h), or a
// client of the environment server (agent/remote_env.h), which share one ZeroMQ context held here.
#pragma once

#include <memory>

#include "agent/agent_config.h"
#include "agent/episode_runner.h"
#include "agent/toy_envs.h"

namespace zmq {
class context_t;
}

namespace rlcpp {

class EnvMaker {
 public:
  // `task` (the run's: calc's arithmetic, guess's numbers) must outlive it.
  EnvMaker(const AgentConfig& config, const Task& task);
  ~EnvMaker();
  EnvMaker(const EnvMaker&) = delete;
  EnvMaker& operator=(const EnvMaker&) = delete;

  std::shared_ptr<Environment> make(const Episode& episode) const;
  // An in-process environment with its expert, for demonstrations; errors name agent.env when there is none.
  std::unique_ptr<ExpertEnvironment> make_expert() const;
  // make() as the episode runner takes it; valid while this lives.
  EnvFactory factory() const;
  // Environments whose calls wait on another process: stepped side by side.
  bool remote() const { return config_.env == "remote"; }

 private:
  AgentConfig config_;
  const Task& task_;
  std::unique_ptr<zmq::context_t> zmq_;
};

}  // namespace rlcpp
