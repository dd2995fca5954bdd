// The `zmq` weight-sync channel (ipc:// or tcp://): the publisher sends each version as one chunked multipart
// message (weightsync/weight_message.h) and waits for the reply; the subscriber verifies the message into a
// staging buffer, hands the verified buffer to its owner's swap callback (run in the owner's thread, so between
// engine steps) and only then acknowledges the version. A refused message (bad checksum, cut short, wrong
// layout, stale version, a NaN or an infinity among the weights) gets an `error` reply and the publisher sends it again, up to max_attempts.
//
// Sockets: the subscriber owns a ROUTER (bound or connected), the publisher a DEALER. A tcp endpoint beyond this
// machine needs CURVE keys (core/curve.h); the side that binds admits only the public keys it was given.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/curve.h"
#include "core/wire.h"
#include "model/parameters.h"
#include "weightsync/cuda_ipc_channel.h"
#include "weightsync/nccl_channel.h"

namespace rlcpp {

// A publish the subscriber did not answer within reply_timeout_ms (a dead or hung subscriber), told apart
// from a refusal so that the owner may replace the subscriber.
class WeightSyncTimeout : public Error {
 public:
  using Error::Error;
};

struct ZmqPublisherOptions {
  int64_t chunk_floats = int64_t{16} << 20;  // 64 MiB chunks
  int max_attempts = 3;
  long reply_timeout_ms = 60000;
  CurveOptions curve;  // keys, for an endpoint beyond this machine
  // Fault injection for tests: called on the encoded frames before each send (attempt counts from 1).
  std::function<void(std::vector<zmq::message_t>& frames, int attempt)> tamper;
};

struct PublishStats {
  int64_t version = 0;
  int64_t bytes = 0;
  int attempts = 0;
  double seconds = 0;
  std::vector<std::string> refusals;  // the subscriber's error replies, one per refused attempt
};

class ZmqWeightPublisher {
 public:
  // Connects (or binds when `bind`) to the subscriber's endpoint.
  ZmqWeightPublisher(zmq::context_t& ctx, const std::string& endpoint, bool bind = false,
                     ZmqPublisherOptions options = {});
  // Sends `version` (> the last one published) and waits for its acknowledgement; throws when the subscriber
  // refuses every attempt or refuses our CURVE handshake (at once, naming why), or WeightSyncTimeout when it
  // does not answer within the timeout. `rebase`: the first publish of a trainer that (re)started, to a
  // subscriber that outlives trainers (a remote worker): taken even when not newer than the subscriber's
  // version, which then counts on from `version`.
  PublishStats publish(const ParameterStore& params, int64_t version, bool rebase = false);
  // The same for a "weights" message made elsewhere (weightsync/cuda_ipc_channel.h: a cuda-ipc announcement).
  PublishStats publish(WireMessage message, int64_t version, bool rebase = false);
  // The two halves of a publish, for a transport whose data moves between them (nccl: the announcement to every
  // subscriber, then the broadcast, then every acknowledgement): send `message` once, without waiting ...
  void post(const WireMessage& message);
  // ... and wait for the acknowledgement of `version`: throws naming a refusal, WeightSyncTimeout past the timeout.
  void await_ack(int64_t version);
  // Between the two, while the data moves elsewhere: throws naming the subscriber's refusal of `version` when one
  // has arrived, without waiting (a refusing nccl worker never joins the broadcast, which would otherwise wait
  // out its whole timeout); an acknowledgement that arrives is kept for await_ack.
  void check_no_refusal(int64_t version);
  // The acknowledgement check_no_refusal has read and await_ack takes next, if any.
  std::optional<int64_t> ack_read_early() const { return early_ack_; }
  std::string endpoint() const;  // bound endpoint read back when bound
  int64_t last_version() const { return last_version_; }

 private:
  void check_refused();
  int64_t send(const WireMessage& message, int attempt);  // bytes sent
  // The subscriber's answer to `version`: nullopt for its acknowledgement, else its refusal.
  std::optional<std::string> next_answer(int64_t version);
  // What a reply says of `version`: an acknowledgement, a refusal (its text), or nothing (an earlier version's).
  struct Answer {
    bool ack = false;
    std::optional<std::string> refusal;
  };
  Answer read_answer(ReceivedFrames& in, int64_t version) const;

  zmq::socket_t socket_;
  HandshakeMonitor handshakes_;  // connected: says why a subscriber refuses us when a publish times out
  ZmqPublisherOptions options_;
  int64_t last_version_ = -1;
  std::optional<int64_t> early_ack_;  // an acknowledgement check_no_refusal read before await_ack asked
};

class ZmqWeightSubscriber {
 public:
  // `layout` is what every publish must match (names, shapes, offsets); `current_version` the weights in use;
  // `curve` the keys for an endpoint beyond this machine; `device` where the weights are used: a GPU's context
  // also takes cuda-ipc announcements (weightsync/cuda_ipc_channel.h) and nccl joins and announcements
  // (weightsync/nccl_channel.h), whose weights then arrive on that GPU. `layout`, when given, replaces the
  // model's: the tensors every publish carries instead of the model's parameters (a LoRA run's adapters,
  // model/lora.h; over zmq only).
  ZmqWeightSubscriber(zmq::context_t& ctx, const std::string& endpoint, bool bind, const ModelConfig& config,
                      int64_t current_version, const CurveOptions& curve = {},
                      const ExecContext& device = ExecContext::cpu(), std::vector<ParameterInfo> layout = {});
  std::string endpoint() const;

  // Called with verified weights (a fresh store the callee may keep: on the host, or on the GPU for a cuda-ipc
  // announcement) and their version.
  using Swap = std::function<void(ParameterStore weights, int64_t version)>;
  // Serves at most one message within `timeout_ms` (-1 = wait). Returns true when a new version was swapped in
  // and acknowledged; a refused message is answered with an error and false returned.
  bool poll(long timeout_ms, const Swap& swap);
  // A LoRA base message (header "lora": {"rank", "alpha", "targets"}, a trainer's rebase of a LoRA run): the
  // model's parameters (the frozen base), then the adapters'. `hook` reads the header field (throwing to refuse
  // it) and returns the adapters' layout; the message is checked against the model's layout followed by that one
  // (weight_message.h concatenated_layout), swapped in whole, and from then on every publish carries the adapters
  // alone, until a rebase that is no LoRA base (a run without LoRA: the whole model again). Without a hook such a
  // message is refused.
  using LoraLayoutHook = std::function<std::vector<ParameterInfo>(const Json& lora)>;
  void take_lora_bases(LoraLayoutHook hook);
  int64_t version() const { return version_; }
  const std::string& last_error() const { return last_error_; }
  // For polling together with other sockets (readable = a publish is waiting).
  zmq::socket_t& socket() { return socket_; }

 private:
  zmq::socket_t socket_;
  ModelConfig config_;
  CudaIpcWeightImport ipc_;
  NcclWeightImport nccl_;
  std::vector<ParameterInfo> layout_;
  bool own_layout_ = false;  // layout_ is not the model's (adapters)
  int64_t total_floats_ = 0;
  LoraLayoutHook lora_hook_;
  int64_t limit_floats_ = 0;  // the largest publish admitted: total_floats_, or room for a LoRA base
  bool lora_layout_ = false;  // layout_ is a LoRA base's adapters (a later plain rebase restores the model's)
  int64_t version_ = 0;
  std::string last_error_;
};

}  // namespace rlcpp
