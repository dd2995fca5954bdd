// Metrics of a loss or of a batch, kept as mergeable partial sums so that the values over a global batch come
// out the same however it is cut into micro-batches (or data-parallel shards):
//   sum  : additive (a loss contribution already divided by the global normaliser) -> value is the sum
//   mean : (sum, count) pairs (e.g. clipped tokens / valid tokens)                  -> value is sum / count
//   max, min                                                                         -> value is the extreme
// Names are verl's leaf names (pg_loss, pg_clipfrac, ppo_kl, vf_loss, ...); the caller adds the "actor/" or
// "critic/" prefix when it logs them.
#pragma once

#include <map>
#include <string>

namespace rlcpp {

enum class MetricReduce { kSum, kMean, kMax, kMin };

struct MetricEntry {
  MetricReduce reduce = MetricReduce::kSum;
  double sum = 0;    // kSum / kMean: running sum; kMax / kMin: the extreme so far
  double count = 0;  // kMean: running weight; kMax / kMin: number of contributions
};

class LossMetrics {
 public:
  void add_sum(const std::string& name, double value);
  void add_mean(const std::string& name, double sum, double count);
  void add_max(const std::string& name, double value);
  void add_min(const std::string& name, double value);

  // Combines the partial sums of another micro-batch or shard; a name present in both must have the same reduce.
  void merge(const LossMetrics& other);

  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  // Final value; a mean over zero weight is 0 (as verl's masked_mean of an empty mask). Throws on an unknown name.
  double value(const std::string& name) const;
  // Every final value, names prefixed with `prefix` (e.g. "actor/").
  std::map<std::string, double> values(const std::string& prefix = "") const;
  const std::map<std::string, MetricEntry>& entries() const { return entries_; }

 private:
  MetricEntry& entry(const std::string& name, MetricReduce reduce);
  std::map<std::string, MetricEntry> entries_;
};

}  // namespace rlcpp
