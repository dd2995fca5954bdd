#include "agent/env_maker.h"

#include <zmq.hpp>

#include "agent/remote_env.h"
#include "core/error.h"

namespace rlcpp {

EnvMaker::EnvMaker(const AgentConfig& config, const Task& task) : config_(config), task_(task) {
  config_.validate();
  RLCPP_CHECK(config_.enabled(), "agent: no environment (config key 'agent.env' is \"\")");
  RLCPP_CHECK(config_.env != "guess" || task.name() == "guess",
              "config key 'agent.env': \"guess\" plays task guess (task.name \"guess\"), got task " << task.name());
  if (remote()) zmq_ = std::make_unique<zmq::context_t>(1);
}

EnvMaker::~EnvMaker() = default;

std::shared_ptr<Environment> EnvMaker::make(const Episode& episode) const {
  if (config_.env == "remote")
    return std::make_shared<RemoteEnvironment>(*zmq_, config_.endpoint, config_.call_timeout_s, episode_key(episode));
  return make_expert();
}

std::unique_ptr<ExpertEnvironment> EnvMaker::make_expert() const {
  if (config_.env == "calc") return make_calc_env(task_, config_.demo_tool_share);
  if (config_.env == "guess") return make_guess_env(config_.max_turns, config_.demo_bisect_share, config_.guess_feedback == "interval");
  RLCPP_FAIL("config key 'agent.env': \"" << config_.env << "\" has no in-process expert to demonstrate with (calc "
                                          << "and guess do; give a remote run an init_checkpoint)");
}

EnvFactory EnvMaker::factory() const {
  return [this](const Episode& e) { return make(e); };
}

}  // namespace rlcpp
