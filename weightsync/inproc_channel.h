// The `inproc` weight-sync channel (colocated placement): the engine reads the trainer's own parameter buffer,
// so a publish copies nothing; it is a version bump the subscriber sees between engine steps and acknowledges.
// Both ends hold copies of one ParameterStore (copies share the buffer); the subscriber checks that they do.
// Nothing is received, so nothing is checked here: the engine's set_weights refuses non-finite weights.
#pragma once

#include <atomic>
#include <cstdint>

#include "model/parameters.h"

namespace rlcpp {

class InprocWeightChannel {
 public:
  // `trainer_params` is the store the trainer updates in place; `version` the version it holds now.
  InprocWeightChannel(const ParameterStore& trainer_params, int64_t version);

  // Publisher side: the trainer's buffer now holds `version` (> the last published).
  void publish(int64_t version);
  int64_t published_version() const { return published_.load(); }

  // Subscriber side: `engine_params` must share the trainer's buffer (same data pointer and size). Returns the
  // newly published version and acknowledges it, or -1 when nothing new was published since the last poll.
  int64_t poll(const ParameterStore& engine_params);
  int64_t acknowledged_version() const { return acknowledged_.load(); }

 private:
  const float* buffer_;
  int64_t numel_;
  std::atomic<int64_t> published_;
  std::atomic<int64_t> acknowledged_;
};

}  // namespace rlcpp
