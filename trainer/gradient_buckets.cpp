#include "trainer/gradient_buckets.h"

#include "core/config.h"
#include "core/error.h"
#include "core/metrics.h"

namespace rlcpp {

GradientBuckets::GradientBuckets(Communicator& comm, std::vector<std::pair<int64_t, int64_t>> layer_spans,
                                 ParameterStore& grads, std::vector<float>* gathered)
    : comm_(comm), grads_(grads), layers_(std::move(layer_spans)), gathered_(gathered) {
  if (gathered_) gathered_->resize(static_cast<size_t>(comm.size() * grads.numel()));
  int64_t at = 0;
  for (const auto& [begin, end] : layers_) {
    RLCPP_CHECK(begin >= at && end >= begin, "gradient buckets: layer spans out of order");
    if (begin > at) rest_.emplace_back(at, begin);
    at = end;
  }
  if (grads.numel() > at) rest_.emplace_back(at, grads.numel());
}

Transformer::GradsReadyFn GradientBuckets::on_ready() {
  return [this](int64_t begin, int64_t end) {
    const size_t expected = layers_.size() - 1 - static_cast<size_t>(started_layers_);
    RLCPP_CHECK(started_layers_ < static_cast<int64_t>(layers_.size()) &&
                    layers_[expected] == std::make_pair(begin, end),
                "gradient buckets: the backward completed span [" << begin << ", " << end << ") out of order");
    start(begin, end);
    ++started_layers_;
    comm_.progress();
  };
}

void GradientBuckets::start(int64_t begin, int64_t end) {
  float* g = grads_.flat().data<float>();
  if (gathered_)
    comm_.start_all_gather(g + begin, end - begin, gathered_->data() + comm_.size() * begin);
  else
    comm_.start_all_reduce(g + begin, end - begin);
}

double GradientBuckets::finish() {
  for (; started_layers_ < static_cast<int64_t>(layers_.size()); ++started_layers_) {
    const auto& [begin, end] = layers_[layers_.size() - 1 - static_cast<size_t>(started_layers_)];
    start(begin, end);
  }
  for (const auto& [begin, end] : rest_) start(begin, end);
  Stopwatch wait;
  comm_.wait_all();
  const double waited = wait.seconds();
  if (gathered_) {  // rank 0's, then + rank 1's, ...: one process's left-to-right sum of the same shards
    float* g = grads_.flat().data<float>();
    std::vector<std::pair<int64_t, int64_t>> all = layers_;
    all.insert(all.end(), rest_.begin(), rest_.end());
    for (const auto& [begin, end] : all) {
      const int64_t n = end - begin;
      const float* from = gathered_->data() + comm_.size() * begin;
      for (int64_t i = 0; i < n; ++i) g[begin + i] = from[i];
      for (int r = 1; r < comm_.size(); ++r)
        for (int64_t i = 0; i < n; ++i) g[begin + i] += from[r * n + i];
    }
  }
  return waited;
}

std::pair<size_t, size_t> rank_shard(size_t count, int rank, int size) {
  const size_t r = static_cast<size_t>(rank), n = static_cast<size_t>(size);
  return {count * r / n, count * (r + 1) / n};
}

void reduce_loss_over_ranks(Communicator& comm, double& loss, int64_t& tokens, LossMetrics& metrics) {
  if (comm.size() == 1) return;
  Json mine = {{"loss", loss}, {"tokens", tokens}, {"metrics", Json::array()}};
  for (const auto& [name, e] : metrics.entries())
    mine["metrics"].push_back({name, static_cast<int>(e.reduce), e.sum, e.count});
  loss = 0;
  tokens = 0;
  metrics = LossMetrics();
  for (const std::string& piece : comm.all_gather(mine.dump())) {
    const Json j = Json::parse(piece);
    loss += j.at("loss").get<double>();
    tokens += j.at("tokens").get<int64_t>();
    LossMetrics theirs;
    for (const Json& m : j.at("metrics")) {
      const std::string name = m.at(0).get<std::string>();
      const double sum = m.at(2).get<double>(), count = m.at(3).get<double>();
      switch (static_cast<MetricReduce>(m.at(1).get<int>())) {
        case MetricReduce::kSum: theirs.add_sum(name, sum); break;
        case MetricReduce::kMean: theirs.add_mean(name, sum, count); break;
        case MetricReduce::kMax: theirs.add_max(name, sum); break;
        case MetricReduce::kMin: theirs.add_min(name, sum); break;
      }
    }
    metrics.merge(theirs);
  }
}

}  // namespace rlcpp
