#include "weightsync/inproc_channel.h"

#include "core/error.h"

namespace rlcpp {

InprocWeightChannel::InprocWeightChannel(const ParameterStore& trainer_params, int64_t version)
    : buffer_(trainer_params.flat().data<float>()),
      numel_(trainer_params.numel()),
      published_(version),
      acknowledged_(version) {}

void InprocWeightChannel::publish(int64_t version) {
  const int64_t last = published_.load();
  RLCPP_CHECK(version > last, "weight sync (inproc): version " << version << " published after " << last
                                                               << " (must increase)");
  published_.store(version);
}

int64_t InprocWeightChannel::poll(const ParameterStore& engine_params) {
  RLCPP_CHECK(engine_params.flat().data<float>() == buffer_ && engine_params.numel() == numel_,
              "weight sync (inproc): the engine's parameters (" << engine_params.numel()
                                                                << " floats) are not the trainer's buffer ("
                                                                << numel_ << " floats); use the zmq channel");
  const int64_t published = published_.load();
  if (published == acknowledged_.load()) return -1;
  acknowledged_.store(published);
  return published;
}

}  // namespace rlcpp
