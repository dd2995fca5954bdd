// `rlcpp serve`'s /metrics in Prometheus text format (names prefixed rlcpp_, counters suffixed _total): requests
// by status, tokens, time to first token, the batch, the KV cache's blocks and the prefix cache's hits
// (README "Serving" lists them).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "rollout/serve_loop.h"

namespace rlcpp {

std::string prometheus_text(const ServeLoopFigures& f, const std::map<int, int64_t>& responses_by_status,
                            const std::string& model);

}  // namespace rlcpp
