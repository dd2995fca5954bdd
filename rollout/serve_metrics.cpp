#include "rollout/serve_metrics.h"

#include <sstream>

namespace rlcpp {

namespace {

void metric(std::ostringstream& os, const std::string& name, const char* type, const char* help, double value,
            const std::string& labels) {
  os << "# HELP rlcpp_" << name << " " << help << "\n# TYPE rlcpp_" << name << " " << type << "\nrlcpp_" << name
     << "{" << labels << "} " << value << "\n";
}

}  // namespace

std::string prometheus_text(const ServeLoopFigures& f, const std::map<int, int64_t>& responses_by_status,
                            const std::string& model) {
  std::ostringstream os;
  os.precision(12);
  const std::string m = "model=\"" + model + "\"";
  os << "# HELP rlcpp_http_responses_total HTTP responses to completion requests by status\n"
        "# TYPE rlcpp_http_responses_total counter\n";
  for (const auto& [status, count] : responses_by_status)
    os << "rlcpp_http_responses_total{" << m << ",status=\"" << status << "\"} " << count << "\n";
  const RolloutStats& s = f.stats;
  metric(os, "requests_running", "gauge", "requests being served (admitted or queued in the engine)",
         static_cast<double>(f.jobs_in_flight), m);
  metric(os, "requests_finished_total", "counter", "requests whose every choice ended",
         static_cast<double>(f.jobs_done), m);
  metric(os, "requests_cancelled_total", "counter", "requests dropped because the client went away",
         static_cast<double>(f.jobs_cancelled), m);
  metric(os, "requests_failed_total", "counter", "requests failed by an engine error",
         static_cast<double>(f.jobs_failed), m);
  metric(os, "sequences_running", "gauge", "sequences in the batch after the last step",
         static_cast<double>(f.running_sequences), m);
  metric(os, "sequences_waiting", "gauge", "sequences queued for admission",
         static_cast<double>(f.waiting_sequences), m);
  metric(os, "generation_tokens_total", "counter", "tokens sampled", static_cast<double>(s.generated_tokens), m);
  metric(os, "prefill_tokens_total", "counter", "prompt tokens run through the model",
         static_cast<double>(s.prefill_tokens), m);
  metric(os, "prefill_tokens_saved_total", "counter",
         "prompt tokens not run through the model: prefix-cache hits and a request's n choices sharing one prefill",
         static_cast<double>(s.prefill_tokens_saved), m);
  metric(os, "prefix_cache_queried_tokens_total", "counter", "prompt tokens looked up in the prefix cache",
         static_cast<double>(s.prefix_cache_queried_tokens), m);
  metric(os, "prefix_cache_hit_tokens_total", "counter", "prompt tokens found in the prefix cache",
         static_cast<double>(s.prefix_cache_hit_tokens), m);
  metric(os, "prefix_cache_hit_rate", "gauge", "prefix_cache_hit_tokens_total / prefix_cache_queried_tokens_total",
         s.prefix_cache_hit_rate(), m);
  metric(os, "prefix_cache_enabled", "gauge", "1 when the prefix cache is on", f.prefix_cache ? 1 : 0, m);
  metric(os, "kv_blocks_total", "gauge", "KV-cache blocks", static_cast<double>(f.blocks_total), m);
  metric(os, "kv_blocks_used", "gauge", "KV-cache blocks held by sequences", static_cast<double>(f.blocks_used), m);
  metric(os, "kv_blocks_cached", "gauge", "KV-cache blocks findable by the prefix cache (free or in use)",
         static_cast<double>(f.blocks_cached), m);
  metric(os, "preemptions_total", "counter", "sequences preempted for blocks (recomputed later)",
         static_cast<double>(s.preemptions), m);
  metric(os, "engine_steps_total", "counter", "engine steps", static_cast<double>(s.steps), m);
  metric(os, "time_to_first_token_seconds_sum", "counter", "request received to its first token, summed",
         f.ttft_sum_s, m);
  metric(os, "time_to_first_token_seconds_count", "counter", "requests that got a first token",
         static_cast<double>(f.ttft_count), m);
  return os.str();
}

}  // namespace rlcpp
