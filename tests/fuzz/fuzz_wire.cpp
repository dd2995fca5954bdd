// libFuzzer target: every message a worker or trainer receives. The input is a multipart message, each frame a
// 2-byte little-endian length and its bytes; it is decoded as the wire format (core/wire.h) and then as the
// message its header's "type" names: a generate request and its result (rollout/request_wire.h), a weights
// publish against the tiny model's layout (weightsync/weight_message.h). The whole input is also given to the
// reward server reply parser (reward/remote_reward.h).
#include <zmq.hpp>

#include "core/wire.h"
#include "model/model_config.h"
#include "model/parameters.h"
#include "reward/remote_reward.h"
#include "rollout/request_wire.h"
#include "tests/fuzz/fuzz_support.h"
#include "weightsync/weight_message.h"

namespace {

std::vector<zmq::message_t> frames_of(const uint8_t* data, size_t size) {
  std::vector<zmq::message_t> frames;
  size_t at = 0;
  while (at + 2 <= size && frames.size() < 80) {
    const size_t n = std::min<size_t>(data[at] | (size_t{data[at + 1]} << 8), size - at - 2);
    frames.emplace_back(data + at + 2, n);
    at += 2 + n;
  }
  return frames;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rlcpp;
  static const ModelConfig model = model_preset("tiny");
  static const std::vector<ParameterInfo> layout = parameter_layout(model);
  static const int64_t total = model.num_parameters();
  fuzz::expect_only_errors([&] {
    std::vector<zmq::message_t> frames = frames_of(data, size);
    const WireMessage m = decode_wire_message(frames, weights_limits(total, total));
    const std::string type = m.type();
    uint64_t id = 0;
    if (type == "generate") decode_generate_request(m, model, RequestLimits{}, id);
    if (type == "result") decode_generate_result(m, id);
    if (type == "weights") {
      std::vector<float> out(static_cast<size_t>(total));
      decode_weights(m, layout, total, out.data());
    }
  });
  fuzz::expect_only_errors([&] {
    parse_remote_reply(std::string(reinterpret_cast<const char*>(data), size), 4, 0.5);
  });
  return 0;
}
