#include "trainer/loss_metrics.h"

#include <algorithm>

#include "core/error.h"

namespace rlcpp {

namespace {

const char* reduce_name(MetricReduce r) {
  switch (r) {
    case MetricReduce::kSum: return "sum";
    case MetricReduce::kMean: return "mean";
    case MetricReduce::kMax: return "max";
    case MetricReduce::kMin: return "min";
  }
  return "?";
}

}  // namespace

MetricEntry& LossMetrics::entry(const std::string& name, MetricReduce reduce) {
  auto [it, inserted] = entries_.try_emplace(name);
  if (inserted) it->second.reduce = reduce;
  RLCPP_CHECK(it->second.reduce == reduce, "metric '" << name << "' is a " << reduce_name(it->second.reduce)
                                                      << " metric, cannot add to it as a " << reduce_name(reduce));
  return it->second;
}

void LossMetrics::add_sum(const std::string& name, double value) { entry(name, MetricReduce::kSum).sum += value; }

void LossMetrics::add_mean(const std::string& name, double sum, double count) {
  MetricEntry& e = entry(name, MetricReduce::kMean);
  e.sum += sum;
  e.count += count;
}

void LossMetrics::add_max(const std::string& name, double value) {
  MetricEntry& e = entry(name, MetricReduce::kMax);
  e.sum = e.count == 0 ? value : std::max(e.sum, value);
  e.count += 1;
}

void LossMetrics::add_min(const std::string& name, double value) {
  MetricEntry& e = entry(name, MetricReduce::kMin);
  e.sum = e.count == 0 ? value : std::min(e.sum, value);
  e.count += 1;
}

void LossMetrics::merge(const LossMetrics& other) {
  for (const auto& [name, o] : other.entries_) {
    switch (o.reduce) {
      case MetricReduce::kSum: add_sum(name, o.sum); break;
      case MetricReduce::kMean: add_mean(name, o.sum, o.count); break;
      case MetricReduce::kMax:
        if (o.count > 0) add_max(name, o.sum);
        break;
      case MetricReduce::kMin:
        if (o.count > 0) add_min(name, o.sum);
        break;
    }
  }
}

double LossMetrics::value(const std::string& name) const {
  auto it = entries_.find(name);
  RLCPP_CHECK(it != entries_.end(), "no metric named '" << name << "'");
  const MetricEntry& e = it->second;
  if (e.reduce == MetricReduce::kMean) return e.count > 0 ? e.sum / e.count : 0.0;
  return e.sum;
}

std::map<std::string, double> LossMetrics::values(const std::string& prefix) const {
  std::map<std::string, double> out;
  for (const auto& [name, e] : entries_) out[prefix + name] = value(name);
  return out;
}

}  // namespace rlcpp
