#include "weightsync/zmq_channel.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "weightsync/weight_message.h"

namespace rlcpp {

namespace {

// Smallest chunk a subscriber admits; bounds the number of frames it will read for one publish.
constexpr int64_t kMinChunkFloats = 4096;

std::string last_endpoint(const zmq::socket_t& socket) { return socket.get(zmq::sockopt::last_endpoint); }

void reply(zmq::socket_t& socket, std::vector<zmq::message_t>& envelope, const std::string& type, int64_t version,
           const std::string& error = "") {
  WireMessage m(type);
  m.header["version"] = version;
  if (!error.empty()) m.header["error"] = error;
  send_wire_message(socket, envelope, m);
}

}  // namespace

ZmqWeightPublisher::ZmqWeightPublisher(zmq::context_t& ctx, const std::string& endpoint, bool bind,
                                       ZmqPublisherOptions options)
    : socket_(ctx, zmq::socket_type::dealer), options_(std::move(options)) {
  RLCPP_CHECK(options_.chunk_floats >= kMinChunkFloats,
              "weight sync chunk_floats " << options_.chunk_floats << " is below the minimum " << kMinChunkFloats);
  RLCPP_CHECK(options_.max_attempts >= 1, "weight sync max_attempts must be >= 1, got " << options_.max_attempts);
  socket_.set(zmq::sockopt::linger, 0);
  if (bind) {
    secure_bind(ctx, socket_, endpoint, options_.curve, "weight sync publisher");
    bind_endpoint(socket_, endpoint, "weight sync publisher");
  } else {
    const bool curve = secure_connect(socket_, endpoint, options_.curve, "weight sync publisher");
    handshakes_ = HandshakeMonitor(ctx, socket_, curve);
    socket_.connect(endpoint);
  }
}

std::string ZmqWeightPublisher::endpoint() const { return last_endpoint(socket_); }

PublishStats ZmqWeightPublisher::publish(const ParameterStore& params, int64_t version, bool rebase) {
  RLCPP_CHECK(version > last_version_,
              "weight sync: version " << version << " published after " << last_version_ << " (must increase)");
  const auto start = std::chrono::steady_clock::now();
  WireMessage message = encode_weights(params, version, options_.chunk_floats);
  const double encoding_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PublishStats stats = publish(std::move(message), version, rebase);
  stats.seconds += encoding_s;
  return stats;
}

PublishStats ZmqWeightPublisher::publish(WireMessage message, int64_t version, bool rebase) {
  RLCPP_CHECK(version > last_version_,
              "weight sync: version " << version << " published after " << last_version_ << " (must increase)");
  RLCPP_CHECK(message.header.value("version", int64_t{-1}) == version,
              "weight sync: a message of version " << message.header.value("version", Json()).dump()
                                                   << " published as version " << version);
  const auto start = std::chrono::steady_clock::now();
  if (rebase) message.header["rebase"] = true;
  PublishStats stats;
  stats.version = version;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    stats.bytes += send(message, attempt);
    stats.attempts = attempt;
    std::optional<std::string> refusal = next_answer(version);
    if (!refusal) {
      last_version_ = version;
      stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return stats;
    }
    stats.refusals.push_back(std::move(*refusal));
  }
  RLCPP_FAIL("weight sync: version " << version << " refused " << stats.attempts
                                     << " times; last error: " << stats.refusals.back());
  return stats;  // not reached
}

void ZmqWeightPublisher::post(const WireMessage& message) { send(message, 1); }

void ZmqWeightPublisher::await_ack(int64_t version) {
  if (early_ack_ == version) {
    early_ack_.reset();
    last_version_ = std::max(last_version_, version);
    return;
  }
  const std::optional<std::string> refusal = next_answer(version);
  RLCPP_CHECK(!refusal, "weight sync: " << endpoint() << " refused version " << version << ": " << *refusal);
  last_version_ = std::max(last_version_, version);
}

void ZmqWeightPublisher::check_no_refusal(int64_t version) {
  check_refused();
  while (!early_ack_) {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(0));
    ReceivedFrames in;
    if (!(items[0].revents & ZMQ_POLLIN) || !receive_frames(socket_, 0, WireLimits{}, 0, in)) return;
    const Answer a = read_answer(in, version);
    RLCPP_CHECK(!a.refusal, "weight sync: " << endpoint() << " refused version " << version << ": " << *a.refusal);
    if (a.ack) early_ack_ = version;
  }
}

ZmqWeightPublisher::Answer ZmqWeightPublisher::read_answer(ReceivedFrames& in, int64_t version) const {
  RLCPP_CHECK(in.error.empty(), "weight sync: malformed reply: " << in.error);
  const WireMessage r = decode_wire_message(in.frames, WireLimits{});
  if (r.type() == "ack") return {r.header.value("version", int64_t{-1}) == version, std::nullopt};
  RLCPP_CHECK(r.type() == "error", "weight sync: unexpected reply '" << r.type() << "'");
  return {false, r.header.value("error", std::string("(no message)"))};
}

void ZmqWeightPublisher::check_refused() {
  // A subscriber that refused our CURVE handshake has closed the connection for good (a send would then block
  // forever); the refusal is reported before that, so asking before each send and while waiting is enough.
  const std::string refused = handshakes_.refusal();
  RLCPP_CHECK(refused.empty(), "weight sync: " << endpoint() << " refused us: " << refused);
}

int64_t ZmqWeightPublisher::send(const WireMessage& message, int attempt) {
  std::vector<zmq::message_t> frames = encode_wire_message(message);
  if (options_.tamper) options_.tamper(frames, attempt);
  check_refused();
  int64_t bytes = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    bytes += static_cast<int64_t>(frames[i].size());
    socket_.send(frames[i], i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  return bytes;
}

std::optional<std::string> ZmqWeightPublisher::next_answer(int64_t version) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.reply_timeout_ms);
  // Waits for the next reply until the deadline; false when none came.
  auto next_reply = [&](ReceivedFrames& in) {
    while (true) {
      check_refused();
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {handshakes_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, handshakes_.handle() ? 2 : 1, left);
      if ((items[0].revents & ZMQ_POLLIN) && receive_frames(socket_, 0, WireLimits{}, 0, in)) return true;
    }
  };
  // Replies to an earlier version (a late answer after a timeout) are skipped.
  while (true) {
    ReceivedFrames in;
    if (!next_reply(in)) {
      const std::string& failure = handshakes_.last_failure();
      throw WeightSyncTimeout("weight sync: no reply to version " + std::to_string(version) + " from " + endpoint() +
                              " within " + std::to_string(options_.reply_timeout_ms) + " ms" +
                              (failure.empty() ? "" : " (" + failure + ")"));
    }
    const Answer a = read_answer(in, version);
    if (a.refusal) return a.refusal;
    if (a.ack) return std::nullopt;  // else an earlier version's acknowledgement: skipped
  }
}

ZmqWeightSubscriber::ZmqWeightSubscriber(zmq::context_t& ctx, const std::string& endpoint, bool bind,
                                         const ModelConfig& config, int64_t current_version,
                                         const CurveOptions& curve, const ExecContext& device,
                                         std::vector<ParameterInfo> layout)
    : socket_(ctx, zmq::socket_type::router),
      config_(config),
      ipc_(device),
      nccl_(device),
      layout_(layout.empty() ? parameter_layout(config) : layout),
      own_layout_(!layout.empty()),
      version_(current_version) {
  total_floats_ = layout_floats(layout_);
  limit_floats_ = total_floats_;
  socket_.set(zmq::sockopt::linger, 0);
  // No frame larger than a whole publish is read (ZeroMQ drops the connection of a peer that sends one).
  socket_.set(zmq::sockopt::maxmsgsize, weights_limits(total_floats_, kMinChunkFloats).max_message_bytes);
  if (bind) {
    secure_bind(ctx, socket_, endpoint, curve, "weight sync subscriber");
    bind_endpoint(socket_, endpoint, "weight sync subscriber");
  } else {
    secure_connect(socket_, endpoint, curve, "weight sync subscriber");
    socket_.connect(endpoint);
  }
}

std::string ZmqWeightSubscriber::endpoint() const { return last_endpoint(socket_); }

void ZmqWeightSubscriber::take_lora_bases(LoraLayoutHook hook) {
  lora_hook_ = std::move(hook);
  // A base message holds the model's parameters and the adapters (r·(in + out) floats per adapted matrix): room for
  // adapters up to twice the model's size (a base with more is refused).
  const int64_t model_floats = config_.num_parameters();
  limit_floats_ = std::max(total_floats_, 3 * model_floats);
  socket_.set(zmq::sockopt::maxmsgsize, weights_limits(limit_floats_, kMinChunkFloats).max_message_bytes);
}

bool ZmqWeightSubscriber::poll(long timeout_ms, const Swap& swap) {
  ReceivedFrames in;
  if (!receive_frames(socket_, 1, weights_limits(limit_floats_, kMinChunkFloats), timeout_ms, in)) return false;
  int64_t version = -1;
  try {
    if (!in.error.empty()) throw WireError("weights message refused: " + in.error);
    WireMessage message = decode_wire_message(in.frames, weights_limits(limit_floats_, kMinChunkFloats));
    if (is_nccl_join_message(message)) {  // no weights: this end of the nccl world, then an ack at our version
      nccl_.join(message);
      reply(socket_, in.envelope, "ack", version_);
      return false;
    }
    const auto field = message.header.find("version");
    if (field == message.header.end() || !field->is_number_integer())
      throw WireError("weights message refused: header field 'version' is " +
                      (field == message.header.end() ? std::string("missing")
                                                     : field->dump(-1, ' ', false, Json::error_handler_t::replace)) +
                      ", expected an integer");
    version = field->get<int64_t>();
    const auto rebase = message.header.find("rebase");
    if (rebase != message.header.end() && !rebase->is_boolean())
      throw WireError("weights message refused: header field 'rebase' is " +
                      rebase->dump(-1, ' ', false, Json::error_handler_t::replace) + ", expected true or false");
    const bool rebased = rebase != message.header.end() && rebase->get<bool>();
    if (version < 0 || (!rebased && version <= version_))
      throw WireError("weights message refused: version " + std::to_string(version) + " is not newer than " +
                      std::to_string(version_) + (rebased ? " (a rebase needs a version >= 0)" : ""));
    if (lora_layout_ && rebased && !message.header.contains("lora")) {
      // A rebase that is no LoRA base: a trainer's whole model again (a run without LoRA, after a LoRA run's).
      layout_ = parameter_layout(config_);
      own_layout_ = lora_layout_ = false;
      total_floats_ = layout_floats(layout_);
    }
    if (is_cuda_ipc_message(message) || is_nccl_weights_message(message)) {
      if (own_layout_)
        throw WireError("weights message refused: this subscriber takes adapters over zmq, not a " +
                        std::string(is_cuda_ipc_message(message) ? "cuda-ipc" : "nccl") + " announcement");
      int64_t announced = -1;
      ParameterStore staged = is_cuda_ipc_message(message) ? ipc_.receive(message, config_, &announced)
                                                           : nccl_.receive(message, config_, &announced);
      swap(std::move(staged), version);
    } else if (const auto lora = message.header.find("lora"); lora != message.header.end()) {
      if (!lora_hook_) throw WireError("weights message refused: a LoRA base, which this subscriber does not take");
      const std::vector<ParameterInfo> adapters = lora_hook_(*lora);
      const std::vector<ParameterInfo> both = concatenated_layout(parameter_layout(config_), adapters);
      const int64_t floats = layout_floats(both);
      if (floats > limit_floats_)
        throw WireError("weights message refused: a LoRA base of " + std::to_string(floats) + " floats, past the " +
                        std::to_string(limit_floats_) + " this subscriber admits");
      ParameterStore staged(config_, both);
      decode_weights(message, both, staged.numel(), staged.flat().data<float>());
      swap(std::move(staged), version);
      layout_ = adapters;  // every later publish: the adapters alone, until a rebase without a LoRA base
      own_layout_ = lora_layout_ = true;
      total_floats_ = layout_floats(layout_);
    } else {
      ParameterStore staged = own_layout_ ? ParameterStore(config_, layout_) : ParameterStore(config_);
      RLCPP_CHECK(staged.numel() == total_floats_, "weight sync: layout size " << total_floats_ << " != store size "
                                                                               << staged.numel());
      decode_weights(message, layout_, total_floats_, staged.flat().data<float>());
      swap(std::move(staged), version);
    }
  } catch (const std::exception& e) {  // WireError, or any other failure to take these weights: refused either way
    last_error_ = e.what();
    reply(socket_, in.envelope, "error", version, last_error_);
    return false;
  }
  version_ = version;
  reply(socket_, in.envelope, "ack", version);
  return true;
}

}  // namespace rlcpp
