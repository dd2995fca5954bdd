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

void histogram(std::ostringstream& os, const char* name, const char* help, const SecondsHistogram& h,
               const std::string& labels) {
  os << "# HELP rlcpp_" << name << " " << help << "\n# TYPE rlcpp_" << name << " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < std::size(SecondsHistogram::kBounds); ++i) {
    cumulative += h.buckets[i];
    os << "rlcpp_" << name << "_bucket{" << labels << ",le=\"" << SecondsHistogram::kBounds[i] << "\"} " << cumulative
       << "\n";
  }
  os << "rlcpp_" << name << "_bucket{" << labels << ",le=\"+Inf\"} " << h.count << "\nrlcpp_" << name << "_sum{"
     << labels << "} " << h.sum << "\nrlcpp_" << name << "_count{" << labels << "} " << h.count << "\n";
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
  const auto d = [](int64_t x) { return static_cast<double>(x); };
  const Metric metrics[] = {
      {"requests_running", "gauge", "requests being served (admitted or queued in the engine)", d(f.jobs_in_flight)},
      {"requests_finished_total", "counter", "requests whose every choice ended", d(f.jobs_done)},
      {"requests_cancelled_total", "counter", "requests dropped because the client went away", d(f.jobs_cancelled)},
      {"requests_failed_total", "counter", "requests failed by an engine error", d(f.jobs_failed)},
      {"requests_held", "gauge", "harness session turns waiting for the next draw (agent.turns_per_draw)",
       d(f.jobs_held)},
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
  };
  for (const Metric& x : metrics)
    os << "# HELP rlcpp_" << x.name << " " << x.help << "\n# TYPE rlcpp_" << x.name << " " << x.type << "\nrlcpp_"
       << x.name << "{" << m << "} " << x.value << "\n";
  histogram(os, "time_to_first_token_seconds", "a request's arrival to its first token", f.ttft, m);
  histogram(os, "time_per_output_token_seconds", "a finished choice's seconds per token after its first", f.tpot, m);
  return os.str();
}

}  // namespace rlcpp
