#include "report/scaling_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/metrics.h"
#include "model/checkpoint.h"
#include "report/run_records.h"
#include "report/scaling_model.h"

namespace rlcpp {

namespace {

namespace fs = std::filesystem;

// The number of decoder layers of a run's model (its newest checkpoint's config.json).
int64_t run_layers(const std::string& dir) {
  int64_t newest = -1, layers = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(dir) / "checkpoints", ec)) {
    const int64_t step = checkpoint_step_of(entry.path().filename().string());
    if (step <= newest || !fs::exists(entry.path() / "config.json")) continue;
    newest = step;
    layers = load_json_file((entry.path() / "config.json").string()).value("num_hidden_layers", int64_t{0});
  }
  RLCPP_CHECK(layers > 0, "scale: " << dir << " has no checkpoint with a config.json (num_hidden_layers)");
  return layers;
}

double run_parameters(const RunRecords& run) {
  if (run.ledger.is_object() && run.ledger.contains("lines"))
    for (const Json& line : run.ledger["lines"])
      if (line.value("key", std::string()) == "parameters" && line["measured"].is_number())
        return line["measured"].get<double>();
  RLCPP_FAIL("scale: " << run.dir << "/ledger.json holds no parameter count (a run from before the ledger)");
}

bool run_is_async(const RunRecords& run) {
  return run.config.is_object() && run.config.contains("async") &&
         run.config["async"].value("max_staleness", int64_t{0}) > 0;
}

ScalingBase base_of(const std::string& dir, int64_t skip_steps) {
  const RunRecords run = read_run_records(dir);
  return scaling_base_from_records(run.metrics, skip_steps, run_parameters(run), run_layers(dir), run_is_async(run));
}

std::string describe(const ScalingLayout& l) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld worker(s) x %lld thr, %lld rank(s) x %lld thr, %s, %s",
                static_cast<long long>(l.workers), static_cast<long long>(l.worker_threads),
                static_cast<long long>(l.ranks), static_cast<long long>(l.rank_threads),
                l.cores > 0 ? ("sharing " + std::to_string(l.cores) + " cores").c_str() : "a machine each",
                l.async ? "async" : "synchronous");
  return buf;
}

// The first count of `field` (workers or ranks), doubling from `from` up to 4096, whose prediction `holds`,
// with that prediction; nothing when none does.
std::optional<std::pair<int64_t, ScalingPrediction>> first_count_where(
    const ScalingBase& base, ScalingLayout layout, int64_t ScalingLayout::*field, int64_t from,
    const ScalingLinks& links, const std::function<bool(const ScalingPrediction&)>& holds) {
  for (int64_t n = from; n <= 4096; n *= 2) {
    layout.*field = n;
    const ScalingPrediction p = predict_step(base, layout, links);
    if (holds(p)) return std::make_pair(n, p);
  }
  return std::nullopt;
}

}  // namespace

std::string scaling_report(const ScalingOptions& o) {
  const RunRecords base_run = read_run_records(o.base_run);
  const ScalingBase base = base_of(o.base_run, o.skip_steps);
  ScalingLinks links;
  std::string link_note = "10 GB/s (assumed; --link-gbps)";
  if (o.link_gbps > 0) {
    links.bandwidth_bytes_per_s = o.link_gbps * 1e9;
    link_note = std::to_string(o.link_gbps) + " GB/s (--link-gbps)";
  } else if (base.layout.ranks > 1) {  // what the base run's all-reduce achieved, waits and all
    std::vector<double> waits;
    for (const Json& r : base_run.metrics)
      if (record_number(r, "step") > static_cast<double>(o.skip_steps) && r.contains("actor/allreduce_wait_s"))
        waits.push_back(record_number(r, "actor/allreduce_wait_s"));
    if (!waits.empty()) {
      const double r = static_cast<double>(base.layout.ranks);
      const double wait = std::max(median_of(waits), 1e-6);
      links.bandwidth_bytes_per_s = 2 * (r - 1) / r * 4 * base.parameters / wait;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.2f GB/s (measured by the base run's all-reduce)",
                    links.bandwidth_bytes_per_s / 1e9);
      link_note = buf;
    }
  }
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "scaling model fed by %s (%s; mean of the middle half of its steps after %lld)\n"
                "  measured step %.1f ms = rollout side %.1f + learning %.1f + sync %.1f + probe and rest %.1f ms; "
                "%.0f parameters, %lld layers; link %s\n",
                o.base_run.c_str(), describe(base.layout).c_str(), static_cast<long long>(o.skip_steps),
                1e3 * base.step_s, 1e3 * base.rollout_s, 1e3 * base.learn_s, 1e3 * base.sync_s, 1e3 * base.fixed_s,
                base.parameters, static_cast<long long>(base.layers), link_note.c_str());
  out += line;
  const ScalingPrediction self = predict_step(base, base.layout, links);
  std::snprintf(line, sizeof line, "  the model on the base's own layout: %.1f ms (measured %.1f ms)\n",
                1e3 * self.step_s, 1e3 * base.step_s);
  out += line;

  ScalingLayout table = base.layout;
  if (o.threads > 0) table.worker_threads = table.rank_threads = o.threads;
  if (o.cores >= 0) table.cores = o.cores;
  if (o.async >= 0) table.async = o.async == 1;
  std::snprintf(line, sizeof line, "\npredicted step ms (rollout share) — %s, each process %lld thread(s):\n",
                table.cores > 0 ? ("all sharing " + std::to_string(table.cores) + " cores").c_str()
                                : "each process on cores of its own",
                static_cast<long long>(table.rank_threads));
  out += line;
  out += "  workers \\ ranks";
  for (int64_t r : o.ranks) {
    std::snprintf(line, sizeof line, " %17lld", static_cast<long long>(r));
    out += line;
  }
  out += "\n";
  std::string notes;
  for (int64_t w : o.workers) {
    std::snprintf(line, sizeof line, "  %15lld", static_cast<long long>(w));
    out += line;
    for (int64_t r : o.ranks) {
      ScalingLayout l = table;
      l.workers = w;
      l.ranks = r;
      const ScalingPrediction p = predict_step(base, l, links);
      std::snprintf(line, sizeof line, " %9.1f (%3.0f%%)%c", 1e3 * p.step_s, 100 * p.rollout_share,
                    p.dominant == "weight sync" ? 'S' : p.dominant == "all-reduce" ? 'A' : ' ');
      out += line;
    }
    out += "\n";
  }
  out += "  S: the weight sync is the largest part of the step; A: the all-reduce is\n";
  // Where each overhead takes over: the fewest workers whose sync outweighs their rollout, the fewest ranks
  // whose all-reduce outweighs their learning.
  if (const auto w = first_count_where(base, table, &ScalingLayout::workers, 1, links,
                                       [](const ScalingPrediction& p) { return p.sync_s > p.rollout_s; })) {
    std::snprintf(line, sizeof line, "  from %lld workers the weight sync (%.1f ms) outlasts the rollout (%.1f ms)\n",
                  static_cast<long long>(w->first), 1e3 * w->second.sync_s, 1e3 * w->second.rollout_s);
    out += line;
  }
  if (const auto r = first_count_where(base, table, &ScalingLayout::ranks, 2, links,
                                       [](const ScalingPrediction& p) { return p.allreduce_s > p.learn_s; })) {
    std::snprintf(line, sizeof line, "  from %lld ranks the all-reduce (%.2f ms) outlasts the learning (%.2f ms)\n",
                  static_cast<long long>(r->first), 1e3 * r->second.allreduce_s, 1e3 * r->second.learn_s);
    out += line;
  }
  if (!o.check_runs.empty()) {
    out += "\npredicted against measured (other runs of the recipe):\n";
    for (const std::string& dir : o.check_runs) {
      const ScalingBase measured = base_of(dir, o.skip_steps);
      const ScalingPrediction p = predict_step(base, measured.layout, links);
      std::snprintf(line, sizeof line,
                    "  %-40s %s: predicted %.1f ms, measured %.1f ms (%.2fx); rollout share predicted %.0f%%, "
                    "measured %.0f%%\n",
                    dir.c_str(), describe(measured.layout).c_str(), 1e3 * p.step_s, 1e3 * measured.step_s,
                    p.step_s / measured.step_s, 100 * p.rollout_share, 100 * measured.rollout_s / measured.step_s);
      out += line;
    }
  }
  return out;
}

}  // namespace rlcpp
