#include "rollout/serve_metrics.h"

#include <sstream>

namespace rlcpp {

namespace {

struct Metric {
  const char* name;
  const char* type;  // "counter" or "gauge"
  const char* help;
  double value;
};

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
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  const Metric metrics[] = {
      {"requests_running", "gauge", "requests being served (admitted or queued in the engine)", d(f.jobs_in_flight)},
      {"requests_finished_total", "counter", "requests whose every choice ended", d(f.jobs_done)},
      {"requests_cancelled_total", "counter", "requests dropped because the client went away", d(f.jobs_cancelled)},
      {"requests_failed_total", "counter", "requests failed by an engine error", d(f.jobs_failed)},
      {"sequences_running", "gauge", "sequences in the batch after the last step", d(f.running_sequences)},
      {"sequences_waiting", "gauge", "sequences queued for admission", d(f.waiting_sequences)},
      {"generation_tokens_total", "counter", "tokens sampled", d(s.generated_tokens)},
      {"prefill_tokens_total", "counter", "prompt tokens run through the model", d(s.prefill_tokens)},
      {"prefill_tokens_saved_total", "counter",
       "prompt tokens not run through the model: prefix-cache hits and a request's n choices sharing one prefill",
       d(s.prefill_tokens_saved)},
      {"prefix_cache_queried_tokens_total", "counter", "prompt tokens looked up in the prefix cache",
       d(s.prefix_cache_queried_tokens)},
      {"prefix_cache_hit_tokens_total", "counter", "prompt tokens found in the prefix cache",
       d(s.prefix_cache_hit_tokens)},
      {"prefix_cache_hit_rate", "gauge", "prefix_cache_hit_tokens_total / prefix_cache_queried_tokens_total",
       s.prefix_cache_hit_rate()},
      {"prefix_cache_enabled", "gauge", "1 when the prefix cache is on", f.prefix_cache ? 1.0 : 0.0},
      {"kv_blocks_total", "gauge", "KV-cache blocks", d(f.blocks_total)},
      {"kv_blocks_used", "gauge", "KV-cache blocks held by sequences", d(f.blocks_used)},
      {"kv_blocks_cached", "gauge", "KV-cache blocks findable by the prefix cache (free or in use)",
       d(f.blocks_cached)},
      {"preemptions_total", "counter", "sequences preempted for blocks (recomputed later)", d(s.preemptions)},
      {"engine_steps_total", "counter", "engine steps", d(s.steps)},
      {"time_to_first_token_seconds_sum", "counter", "request received to its first token, summed", f.ttft_sum_s},
      {"time_to_first_token_seconds_count", "counter", "requests that got a first token", d(f.ttft_count)},
  };
  for (const Metric& x : metrics)
    os << "# HELP rlcpp_" << x.name << " " << x.help << "\n# TYPE rlcpp_" << x.name << " " << x.type << "\nrlcpp_"
       << x.name << "{" << m << "} " << x.value << "\n";
  return os.str();
}

}  // namespace rlcpp
