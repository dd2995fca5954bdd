#include "report/scaling_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/metrics.h"

namespace rlcpp {

namespace {

double number(const Json& record, const std::string& key) {
  const auto it = record.find(key);
  RLCPP_CHECK(it != record.end() && it->is_number(),
              "scaling model: step " << record.value("step", Json()).dump() << " has no number '" << key << "'");
  return it->get<double>();
}

double number_or(const Json& record, const std::string& key, double fallback) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : fallback;
}

// Cores a side's processes use: processes x threads, capped by the shared machine's cores.
double usable_cores(int64_t processes, int64_t threads, int64_t cores) {
  const double want = static_cast<double>(std::max<int64_t>(processes, 1) * std::max<int64_t>(threads, 1));
  return cores > 0 ? std::min(want, static_cast<double>(cores)) : want;
}

}  // namespace

ScalingBase scaling_base_from_records(const std::vector<Json>& metrics, int64_t skip_steps, double parameters,
                                      int64_t layers, bool async) {
  struct StepParts {
    double rollout, learn, sync, fixed, step;
  };
  std::vector<StepParts> steps;
  ScalingBase base;
  for (const Json& r : metrics) {
    if (number(r, "step") <= static_cast<double>(skip_steps)) continue;
    const auto t = [&](const char* phase) { return number(r, std::string("timing_s/") + phase); };
    const double allreduce = number_or(r, "actor/allreduce_wait_s", 0);
    StepParts s;
    s.rollout = async ? number(r, "timing_s/rollout_wall") + number_or(r, "timing_s/env_wall", 0) +
                            number(r, "timing_s/reward_wall")
                      : t("rollout") + number_or(r, "timing_s/env", 0) + t("reward");
    s.learn = t("old_logprob") + t("ref_logprob") + t("values") + t("advantage") + t("update_actor") +
              t("update_critic") - allreduce;
    s.sync = t("weight_sync");
    // The full-vocabulary mismatch forward (runs of mixed numerics) was part of `other` before it had a phase.
    s.fixed = t("probe") + number_or(r, "timing_s/mismatch", 0) + t("other");
    s.step = t("step") - t("eval") - t("checkpoint");
    steps.push_back(s);
    base.layout.ranks = static_cast<int64_t>(number_or(r, "dp/ranks", 1));
    base.layout.workers = static_cast<int64_t>(number_or(r, "layout/workers", 1));
    base.layout.rank_threads = base.layout.worker_threads = static_cast<int64_t>(number_or(r, "layout/threads", 1));
    base.layout.cores = static_cast<int64_t>(number_or(r, "layout/cores", 0));
  }
  RLCPP_CHECK(!steps.empty(), "scaling model: no step after the first " << skip_steps << " to measure");
  base.layout.async = async;
  // The middle half of the steps by their time, each part averaged over those same steps: robust to the slow
  // and fast outliers of a loaded machine, and the parts add up to the step as they do in each record (medians
  // taken part by part do not: on a loaded machine they moved 16-36 % apart from the steps' median).
  std::sort(steps.begin(), steps.end(), [](const StepParts& a, const StepParts& b) { return a.step < b.step; });
  const size_t quarter = steps.size() / 4;
  const size_t first = quarter, last = std::max(steps.size() - quarter, first + 1);
  StepParts sum{0, 0, 0, 0, 0};
  for (size_t i = first; i < last; ++i) {
    sum.rollout += steps[i].rollout;
    sum.learn += steps[i].learn;
    sum.sync += steps[i].sync;
    sum.fixed += steps[i].fixed;
    sum.step += steps[i].step;
  }
  const double n = static_cast<double>(last - first);
  base.rollout_s = sum.rollout / n;
  base.learn_s = sum.learn / n;
  base.sync_s = sum.sync / n;
  base.fixed_s = sum.fixed / n;
  base.step_s = sum.step / n;
  base.parameters = parameters;
  base.layers = std::max<int64_t>(layers, 1);
  return base;
}

ScalingPrediction predict_step(const ScalingBase& base, const ScalingLayout& layout, const ScalingLinks& links) {
  const ScalingLayout& b = base.layout;
  ScalingPrediction p;
  p.layout = layout;
  // Core-seconds measured, spread over the cores the new layout gives each side. When both sides share one
  // machine and run one after another (synchronous), each may use all of its cores.
  const double rollout_core_s = base.rollout_s * usable_cores(b.workers, b.worker_threads, b.cores);
  const double learn_core_s = base.learn_s * usable_cores(b.ranks, b.rank_threads, b.cores);
  p.rollout_s = rollout_core_s / usable_cores(layout.workers, layout.worker_threads, layout.cores);
  p.learn_s = learn_core_s / usable_cores(layout.ranks, layout.rank_threads, layout.cores);
  if (layout.ranks > 1) {
    const double r = static_cast<double>(layout.ranks);
    const double bytes = 4.0 * base.parameters;
    p.allreduce_s = 2.0 * (r - 1) / r * bytes / links.bandwidth_bytes_per_s +
                    static_cast<double>(base.layers + 1) * links.latency_s * std::log2(r);
  }
  // One publish per worker, each at least the weights over the link.
  const double per_worker = std::max(base.sync_s / static_cast<double>(std::max<int64_t>(b.workers, 1)),
                                     4.0 * base.parameters / links.bandwidth_bytes_per_s);
  p.sync_s = per_worker * static_cast<double>(std::max<int64_t>(layout.workers, 1));
  p.fixed_s = base.fixed_s;
  const double trainer_side = p.learn_s + p.allreduce_s + p.sync_s + p.fixed_s;
  if (!layout.async) {
    p.step_s = p.rollout_s + trainer_side;
  } else {
    p.step_s = std::max(p.rollout_s, trainer_side);
    if (layout.cores > 0)  // overlapped on one machine: no faster than all the work over its cores
      p.step_s = std::max(p.step_s, (rollout_core_s + learn_core_s) / static_cast<double>(layout.cores) +
                                        p.allreduce_s + p.sync_s + p.fixed_s);
  }
  p.rollout_share = p.step_s > 0 ? p.rollout_s / p.step_s : 0;
  const std::pair<double, const char*> parts[] = {
      {p.rollout_s, "rollout"}, {p.learn_s, "learning"}, {p.sync_s, "weight sync"}, {p.allreduce_s, "all-reduce"}};
  p.dominant = std::max_element(std::begin(parts), std::end(parts))->second;
  return p;
}

}  // namespace rlcpp
