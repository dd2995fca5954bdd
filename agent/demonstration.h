// Demonstrations for the SFT warm start of an agent run (multi-turn SFT, the loss on the assistant's tokens only):
// an expert plays the environment, its turns written in tokens as the model would sample them, the environment's
// observations appended as in a rollout.
#pragma once

#include "agent/agent_config.h"
#include "agent/episode.h"
#include "agent/toy_envs.h"
#include "agent/turn_protocol.h"

namespace rlcpp {

// The expert's episode on `problem`, within agent.max_turns and `context` tokens (truncated past them).
Episode demonstrate(const Problem& problem, ExpertEnvironment& env, const TurnProtocol& protocol,
                    const AgentConfig& config, int64_t context, PhiloxStream& rng);

}  // namespace rlcpp
