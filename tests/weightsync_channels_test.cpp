#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "core/curve.h"
#include "model/init.h"
#include "model/lora.h"
#include "weightsync/cuda_ipc_channel.h"
#include "weightsync/inproc_channel.h"
#include "weightsync/nccl_channel.h"
#include "weightsync/weight_message.h"
#include "weightsync/zmq_channel.h"

namespace rlcpp {
namespace {

ModelConfig small_config() {
  ModelConfig cfg = model_preset("tiny");
  cfg.num_hidden_layers = 2;
  return cfg;
}

bool bit_equal(const ParameterStore& a, const ParameterStore& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.flat().data<float>(), b.flat().data<float>(), a.flat().nbytes()) == 0;
}

// A subscriber bound on a fresh ipc endpoint, served from a thread for `polls` messages.
struct SubscriberFixture {
  zmq::context_t ctx;
  ZmqWeightSubscriber sub;
  ParameterStore received;
  int64_t received_version = -1;
  std::vector<bool> outcomes;
  std::thread server;

  explicit SubscriberFixture(const ModelConfig& cfg)
      : sub(ctx, "tcp://127.0.0.1:*", /*bind=*/true, cfg, /*current_version=*/0) {}
  void serve(int polls) {
    server = std::thread([this, polls] {
      for (int i = 0; i < polls; ++i)
        outcomes.push_back(sub.poll(10000, [this](ParameterStore w, int64_t v) {
          received = std::move(w);
          received_version = v;
        }));
    });
  }
  ~SubscriberFixture() {
    if (server.joinable()) server.join();
  }
};

// A hand-made publisher (a DEALER) sending messages the real one never would; error() sends one and returns the
// subscriber's error reply ("<no reply>" / "<ack>" otherwise).
struct RawPublisher {
  zmq::socket_t dealer;
  RawPublisher(zmq::context_t& ctx, const std::string& endpoint) : dealer(ctx, zmq::socket_type::dealer) {
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(endpoint);
  }
  std::string error(const WireMessage& m) {
    send_wire_message(dealer, {}, m);
    ReceivedFrames in;
    if (!receive_frames(dealer, 0, WireLimits{}, 10000, in)) return "<no reply>";
    const WireMessage reply = decode_wire_message(in.frames, WireLimits{});
    return reply.type() == "error" ? reply.header.value("error", std::string("<no message>")) : "<" + reply.type() + ">";
  }
};

ZmqPublisherOptions small_chunks() {
  ZmqPublisherOptions o;
  o.chunk_floats = 50000;  // several chunks for the tiny model
  o.reply_timeout_ms = 10000;
  return o;
}

// A LoRA base message (a remote trainer's rebase of a LoRA run, weightsync/zmq_channel.h): refused by a
// subscriber that takes none and when its "lora" field is bad; taken whole (the model's parameters, then the
// adapters') by one that does, after which a version carries the adapters alone and the model's layout is refused.
TEST(WeightSyncZmq, ALoraBaseIsTakenOnlyWhenAskedAndThenAdaptersAlone) {
  const ModelConfig cfg = small_config();
  LoraConfig lora;
  lora.rank = 2;
  lora.targets = {"q_proj", "down_proj"};
  LoraAdapters adapters(cfg, lora);
  adapters.init(3);
  const ParameterStore base = init_random(cfg, 4);
  ParameterStore both(cfg, concatenated_layout(parameter_layout(cfg), adapters.weights().infos()));
  std::memcpy(both.flat().data<float>(), base.flat().data<float>(), base.flat().nbytes());
  std::memcpy(both.flat().data<float>() + base.numel(), adapters.weights().flat().data<float>(),
              adapters.weights().flat().nbytes());
  const auto base_message = [&](int64_t version, const Json& field) {
    WireMessage m = encode_weights(both, version, 50000);
    m.header["lora"] = field;
    m.header["rebase"] = true;
    return m;
  };
  {
    SubscriberFixture plain(cfg);
    plain.serve(1);
    RawPublisher pub(plain.ctx, plain.sub.endpoint());
    EXPECT_NE(pub.error(base_message(1, lora_config_to_wire(lora))).find("a LoRA base, which this subscriber does not"),
              std::string::npos);
  }
  SubscriberFixture f(cfg);
  f.sub.take_lora_bases([&](const Json& field) { return LoraAdapters(cfg, lora_config_from_wire(field)).weights().infos(); });
  f.serve(4);
  RawPublisher pub(f.ctx, f.sub.endpoint());
  Json bad = lora_config_to_wire(lora);
  bad["rank"] = -1;
  EXPECT_NE(pub.error(base_message(1, bad)).find("rank"), std::string::npos);
  EXPECT_EQ(pub.error(base_message(1, lora_config_to_wire(lora))), "<ack>");
  EXPECT_EQ(pub.error(encode_weights(adapters.weights(), 2, 50000)), "<ack>");
  const std::string refused = pub.error(encode_weights(base, 3, 50000));
  f.server.join();
  EXPECT_NE(refused.find("weights message refused"), std::string::npos) << refused;
  EXPECT_EQ((std::vector<bool>{false, true, true, false}), f.outcomes);
  EXPECT_EQ(f.received_version, 2);
  EXPECT_TRUE(bit_equal(f.received, adapters.weights()));
}

// After a LoRA run's base, a rebase carrying the whole model (a run without LoRA taking over the worker) is taken,
// and the subscriber expects whole models again.
TEST(WeightSyncZmq, APlainRebaseAfterALoraBaseTakesWholeModelsAgain) {
  const ModelConfig cfg = small_config();
  LoraConfig lora;
  lora.rank = 2;
  LoraAdapters adapters(cfg, lora);
  adapters.init(3);
  ParameterStore both(cfg, concatenated_layout(parameter_layout(cfg), adapters.weights().infos()));
  WireMessage base_message = encode_weights(both, 1, 50000);
  base_message.header["lora"] = lora_config_to_wire(lora);
  base_message.header["rebase"] = true;
  const ParameterStore whole = init_random(cfg, 5);
  WireMessage whole_message = encode_weights(whole, 2, 50000);
  whole_message.header["rebase"] = true;
  SubscriberFixture f(cfg);
  f.sub.take_lora_bases([&](const Json& field) { return LoraAdapters(cfg, lora_config_from_wire(field)).weights().infos(); });
  f.serve(3);
  RawPublisher pub(f.ctx, f.sub.endpoint());
  EXPECT_EQ(pub.error(base_message), "<ack>");
  EXPECT_EQ(pub.error(whole_message), "<ack>");
  const std::string refused = pub.error(encode_weights(adapters.weights(), 3, 50000));
  f.server.join();
  EXPECT_NE(refused.find("weights message refused"), std::string::npos) << refused;
  EXPECT_EQ((std::vector<bool>{true, true, false}), f.outcomes);
  EXPECT_EQ(f.received_version, 2);
  EXPECT_TRUE(bit_equal(f.received, whole));
}

TEST(WeightSyncZmq, RoundTripIsBitExactAndAcknowledged) {
  const ModelConfig cfg = small_config();
  const ParameterStore params = init_random(cfg, 11);
  SubscriberFixture f(cfg);
  f.serve(1);
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, small_chunks());
  const PublishStats stats = pub.publish(params, 1);
  f.server.join();
  EXPECT_EQ(stats.attempts, 1);
  EXPECT_GT(stats.bytes, params.numel() * 4);
  EXPECT_EQ(f.outcomes, std::vector<bool>{true});
  EXPECT_EQ(f.received_version, 1);
  EXPECT_EQ(f.sub.version(), 1);
  EXPECT_TRUE(bit_equal(f.received, params));
  EXPECT_EQ(weight_checksum(f.received), weight_checksum(params));
}

TEST(WeightSyncZmq, BadChecksumIsRefusedThenResentOk) {
  const ModelConfig cfg = small_config();
  const ParameterStore params = init_random(cfg, 12);
  SubscriberFixture f(cfg);
  f.serve(2);
  ZmqPublisherOptions o = small_chunks();
  o.tamper = [](std::vector<zmq::message_t>& frames, int attempt) {
    if (attempt != 1) return;
    // Flip one bit in the middle of the second chunk: sizes stay right, only the checksum can tell.
    zmq::message_t& chunk = frames[2];
    static_cast<char*>(chunk.data())[chunk.size() / 2] ^= 0x10;
  };
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, o);
  const PublishStats stats = pub.publish(params, 1);
  f.server.join();
  EXPECT_EQ(stats.attempts, 2);
  ASSERT_EQ(stats.refusals.size(), 1u);
  EXPECT_NE(stats.refusals[0].find("checksum"), std::string::npos) << stats.refusals[0];
  EXPECT_EQ(f.outcomes, (std::vector<bool>{false, true}));
  EXPECT_TRUE(bit_equal(f.received, params));
}

TEST(WeightSyncZmq, TruncatedMessageIsRefused) {
  const ModelConfig cfg = small_config();
  const ParameterStore params = init_random(cfg, 13);
  SubscriberFixture f(cfg);
  f.serve(2);
  ZmqPublisherOptions o = small_chunks();
  o.tamper = [](std::vector<zmq::message_t>& frames, int attempt) {
    if (attempt == 1) frames.pop_back();  // the last chunk never arrives
  };
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, o);
  const PublishStats stats = pub.publish(params, 1);
  f.server.join();
  ASSERT_EQ(stats.refusals.size(), 1u);
  EXPECT_EQ(stats.attempts, 2);
  EXPECT_EQ(f.outcomes, (std::vector<bool>{false, true}));
  EXPECT_TRUE(bit_equal(f.received, params));
}

TEST(WeightSyncZmq, WrongLayoutIsRefusedEveryTime) {
  ModelConfig other = small_config();
  other.num_hidden_layers = 3;  // more parameters than the subscriber expects
  const ParameterStore params = init_random(other, 14);
  SubscriberFixture f(small_config());
  ZmqPublisherOptions o = small_chunks();
  o.max_attempts = 2;
  f.serve(2);
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, o);
  EXPECT_THROW(pub.publish(params, 1), Error);
  f.server.join();
  EXPECT_EQ(f.outcomes, (std::vector<bool>{false, false}));
  EXPECT_EQ(f.received_version, -1);
  EXPECT_EQ(f.sub.version(), 0);
  EXPECT_NE(f.sub.last_error().find("refused"), std::string::npos) << f.sub.last_error();
}

TEST(WeightSyncMessage, ShapeMismatchNamesTheParameter) {
  const ModelConfig cfg = small_config();
  const ParameterStore params = init_random(cfg, 15);
  WireMessage m = encode_weights(params, 3, 1 << 20);
  m.header["layout"][1]["shape"] = Json::array({1, 2});
  std::vector<float> out(static_cast<size_t>(params.numel()));
  try {
    decode_weights(m, params.infos(), params.numel(), out.data());
    FAIL() << "wrong shape accepted";
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find(params.infos()[1].name), std::string::npos) << e.what();
  }
}

// An intact message of diverged weights (checksum right, a NaN inside) is refused before it reaches the
// rollout side, naming the tensor and the element.
TEST(WeightSyncMessage, NonFiniteWeightsAreRefusedNamingTheTensor) {
  const ModelConfig cfg = small_config();
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    ParameterStore params = init_random(cfg, 18);
    params.flat().data<float>()[params.offset_of("model.layers.1.mlp.up_proj.weight") + 11] = bad;
    const WireMessage m = encode_weights(params, 7, 50000);
    std::vector<float> out(static_cast<size_t>(params.numel()));
    try {
      decode_weights(m, params.infos(), params.numel(), out.data());
      ADD_FAILURE() << bad << " accepted";
    } catch (const WireError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("version 7 has non-finite weights: tensor 'model.layers.1.mlp.up_proj.weight' holds"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("at element 11"), std::string::npos) << what;
    }
  }
}

// Over zmq: the subscriber refuses every attempt and never swaps; the publisher's error names the tensor.
TEST(WeightSyncZmq, NonFiniteWeightsAreRefusedEveryTime) {
  const ModelConfig cfg = small_config();
  ParameterStore params = init_random(cfg, 19);
  params.flat().data<float>()[params.offset_of("model.norm.weight")] = NAN;
  SubscriberFixture f(cfg);
  ZmqPublisherOptions o = small_chunks();
  o.max_attempts = 2;
  f.serve(2);
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, o);
  std::string e = "<no error>";
  try {
    pub.publish(params, 1);
  } catch (const Error& err) {
    e = err.what();
  }
  f.server.join();
  EXPECT_NE(e.find("refused 2 times"), std::string::npos) << e;
  EXPECT_NE(e.find("non-finite weights: tensor 'model.norm.weight' holds nan at element 0"), std::string::npos) << e;
  EXPECT_EQ(f.outcomes, (std::vector<bool>{false, false}));
  EXPECT_EQ(f.received_version, -1);
  EXPECT_EQ(f.sub.version(), 0);
}

TEST(WeightSyncZmq, VersionsMustIncrease) {
  const ModelConfig cfg = small_config();
  ParameterStore params = init_random(cfg, 16);
  SubscriberFixture f(cfg);
  f.serve(2);
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, small_chunks());
  pub.publish(params, 1);
  EXPECT_THROW(pub.publish(params, 1), Error);  // the publisher refuses before sending
  params.flat().data<float>()[0] += 1.0f;
  pub.publish(params, 5);
  f.server.join();
  EXPECT_EQ(f.sub.version(), 5);
  EXPECT_TRUE(bit_equal(f.received, params));

  // A subscriber refuses an old version even from a fresh publisher.
  SubscriberFixture g(cfg);
  g.serve(2);
  ZmqPublisherOptions o = small_chunks();
  o.max_attempts = 1;
  ZmqWeightPublisher first(g.ctx, g.sub.endpoint(), false, o);
  first.publish(params, 4);
  ZmqWeightPublisher second(g.ctx, g.sub.endpoint(), false, o);
  EXPECT_THROW(second.publish(params, 2), Error);
  g.server.join();
  EXPECT_EQ(g.sub.version(), 4);
  EXPECT_NE(g.sub.last_error().find("not newer"), std::string::npos) << g.sub.last_error();
}

// A trainer that (re)starts brings a subscriber that outlived the previous one (a remote worker) to its policy
// with a rebase publish: taken although not newer, then versions count on from it; a 'rebase' that is not a
// boolean, or a negative version, is refused naming it.
TEST(WeightSyncZmq, ARebasePublishIsTakenWhateverTheSubscribersVersion) {
  const ModelConfig cfg = small_config();
  ParameterStore params = init_random(cfg, 21);
  SubscriberFixture f(cfg);
  f.serve(5);
  ZmqPublisherOptions o = small_chunks();
  o.max_attempts = 1;
  ZmqWeightPublisher earlier(f.ctx, f.sub.endpoint(), false, o);
  earlier.publish(init_random(cfg, 22), 7);  // the previous trainer's last version
  ZmqWeightPublisher trainer(f.ctx, f.sub.endpoint(), false, o);
  EXPECT_THROW(trainer.publish(params, 3), Error);  // not newer, no rebase: refused
  EXPECT_EQ(f.sub.version(), 7);
  EXPECT_EQ(trainer.publish(params, 3, /*rebase=*/true).attempts, 1);
  ZmqWeightPublisher stale(f.ctx, f.sub.endpoint(), false, o);
  EXPECT_THROW(stale.publish(params, 3), Error);  // from now on 3 is the version to beat
  params.flat().data<float>()[0] += 1.0f;
  trainer.publish(params, 4);
  f.server.join();
  EXPECT_EQ(f.outcomes, (std::vector<bool>{true, false, true, false, true}));
  EXPECT_EQ(f.sub.version(), 4);
  EXPECT_TRUE(bit_equal(f.received, params));

  SubscriberFixture g(cfg);
  g.serve(2);
  RawPublisher raw(g.ctx, g.sub.endpoint());
  const std::vector<std::pair<Json, std::string>> bad = {
      {Json("yes"), "header field 'rebase' is \"yes\", expected true or false"},
      {Json(true), "version -1 is not newer than 0 (a rebase needs a version >= 0)"}};
  for (const auto& [rebase, expected] : bad) {
    WireMessage m = encode_weights(params, rebase.is_boolean() ? -1 : 1, 1 << 20);
    m.header["rebase"] = rebase;
    const std::string error = raw.error(m);
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  }
  g.server.join();
  EXPECT_EQ(g.sub.version(), 0);
}

// A version that is not an integer is refused, naming the field; a string used to throw out of poll (and so
// out of a worker's serve loop), a fraction to be truncated into a version.
TEST(WeightSyncZmq, VersionThatIsNotAnIntegerIsRefusedNamingIt) {
  const ModelConfig cfg = small_config();
  const ParameterStore params = init_random(cfg, 18);
  SubscriberFixture f(cfg);
  f.serve(2);
  RawPublisher raw(f.ctx, f.sub.endpoint());
  for (const Json& bad : {Json("1"), Json(1.5)}) {
    WireMessage m = encode_weights(params, 1, 1 << 20);
    m.header["version"] = bad;
    const std::string error = raw.error(m);
    EXPECT_NE(error.find("header field 'version' is " + bad.dump() + ", expected an integer"), std::string::npos)
        << error;
  }
  f.server.join();
  EXPECT_EQ(f.outcomes, (std::vector<bool>{false, false}));
  EXPECT_EQ(f.sub.version(), 0);
  EXPECT_EQ(f.received_version, -1);
}

// A subscriber bound with CURVE acknowledges a publisher whose key it admits; one with another key gets no reply
// (an error saying the handshake was refused) and the subscriber never sees its weights. Beyond this machine
// neither side goes without keys.
TEST(WeightSyncZmq, CurveSubscriberAcceptsAdmittedPublishersOnly) {
  if (!curve_supported()) GTEST_SKIP() << "this libzmq was built without CURVE";
  const ModelConfig cfg = small_config();
  const ParameterStore params = init_random(cfg, 11);
  zmq::context_t ctx;
  ZapHandler zap(ctx);
  const CurveKeys worker = generate_curve_keys(), trainer = generate_curve_keys(), stranger = generate_curve_keys();
  CurveOptions sub_curve;
  sub_curve.keys = worker;
  sub_curve.clients = {trainer.public_key};
  sub_curve.zap = &zap;
  ZmqWeightSubscriber sub(ctx, "tcp://127.0.0.1:*", /*bind=*/true, cfg, 0, sub_curve);
  // Serves until it took versions 1 and 2, or a minute passed; stopped and joined however the test ends.
  int64_t taken = 0;
  std::jthread server([&](std::stop_token stop) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (taken < 2 && !stop.stop_requested() && std::chrono::steady_clock::now() < deadline)
      if (sub.poll(200, [](ParameterStore, int64_t) {})) ++taken;
  });
  {
    ZmqPublisherOptions bad = small_chunks();
    bad.reply_timeout_ms = 500;
    bad.curve.keys = stranger;
    bad.curve.server_public = worker.public_key;
    zmq::context_t intruder_ctx;  // another process, in practice
    ZmqWeightPublisher intruder(intruder_ctx, sub.endpoint(), false, bad);
    try {
      intruder.publish(params, 5);
      ADD_FAILURE() << "a publisher with an unknown key was answered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("refused us: authentication failed"), std::string::npos) << e.what();
    }
    EXPECT_THROW(intruder.publish(params, 6), Error);  // and again, at once: no send blocks on the closed connection
  }
  ZmqPublisherOptions good = small_chunks();
  good.curve.keys = trainer;
  good.curve.server_public = worker.public_key;
  ZmqWeightPublisher pub(ctx, sub.endpoint(), false, good);
  EXPECT_EQ(pub.publish(params, 1).attempts, 1);
  EXPECT_EQ(pub.publish(params, 2).attempts, 1);
  server.request_stop();
  server.join();
  EXPECT_EQ(taken, 2);
  EXPECT_EQ(sub.version(), 2);  // version 5 never arrived
  EXPECT_GE(zap.refused(), 1);

  EXPECT_THROW(ZmqWeightSubscriber(ctx, "tcp://0.0.0.0:0", true, cfg, 0), Error);
  EXPECT_THROW(ZmqWeightPublisher(ctx, "tcp://10.1.2.3:5555", false, small_chunks()), Error);
}

// A cuda-ipc announcement carries a handle, not the weights. One that reaches a subscriber whose weights live on
// the host (made by hand here: this test needs no GPU) is refused at every attempt, saying where the weights
// would have to be, and the subscriber keeps its version; a message published under another version than its
// own is not sent at all.
TEST(WeightSyncCudaIpc, AHostSubscriberRefusesAnAnnouncementSayingWhy) {
  const ModelConfig cfg = small_config();
  SubscriberFixture f(cfg);
  f.serve(2);
  ZmqPublisherOptions o = small_chunks();
  o.max_attempts = 2;
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, o);
  WireMessage m("weights");
  m.header["version"] = 3;
  m.header["transport"] = "cuda-ipc";
  m.header["total_floats"] = ParameterStore(cfg).numel();
  m.header["layout"] = layout_json(parameter_layout(cfg));
  m.header["device_uuid"] = std::string(32, '0');
  m.header["keyed_checksum"] = "1";
  m.add<uint8_t>("ipc_handle", std::vector<uint8_t>(64, 7));
  EXPECT_THROW(pub.publish(m, 4), Error);  // not this message's version: refused before sending
  try {
    pub.publish(m, 3);
    ADD_FAILURE() << "a host subscriber took a cuda-ipc announcement";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("refused 2 times"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("this subscriber's weights live on cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rlcpp worker --device cuda"), std::string::npos) << e.what();
  }
  f.server.join();
  EXPECT_EQ(f.outcomes, (std::vector<bool>{false, false}));
  EXPECT_EQ(f.sub.version(), 0);
}

// The nccl transport's control messages at a subscriber whose weights live on the host: a join is refused
// saying NCCL joins workers on GPUs, an announcement before any join is refused saying so, and the version stays.
TEST(WeightSyncNccl, AHostSubscriberRefusesTheJoinAndAnUnjoinedAnnouncement) {
  const ModelConfig cfg = small_config();
  SubscriberFixture f(cfg);
  RawPublisher raw(f.ctx, f.sub.endpoint());
  f.serve(2);
  const std::string join = raw.error(nccl_join_message(std::string(128, 'x'), 1, 2, 5.0));
  EXPECT_NE(join.find("NCCL joins workers on GPUs"), std::string::npos) << join;
  WireMessage announce("weights");
  announce.header["version"] = 1;
  announce.header["transport"] = "nccl";
  announce.header["total_floats"] = ParameterStore(cfg).numel();
  announce.header["layout"] = layout_json(parameter_layout(cfg));
  announce.header["keyed_checksum"] = "1";
  announce.header["bucket_floats"] = 1000;
  const std::string early = raw.error(announce);
  EXPECT_NE(early.find("before this worker joined a world"), std::string::npos) << early;
  f.server.join();
  EXPECT_EQ(f.sub.version(), 0);
}

// While a posted version's data moves elsewhere (nccl's broadcast), the trainer asks each publisher without
// waiting: a refusal that has arrived is thrown naming it (the nccl wait then ends at once, not at its
// timeout), nothing yet is no error, and an acknowledgement read there is kept for await_ack.
TEST(WeightSyncZmq, APostedVersionsRefusalIsSeenWithoutWaitingAndItsAckIsKept) {
  const ModelConfig cfg = small_config();
  const ParameterStore params = init_random(cfg, 12);
  SubscriberFixture f(cfg);
  ZmqWeightPublisher pub(f.ctx, f.sub.endpoint(), false, small_chunks());
  pub.check_no_refusal(1);  // nothing sent, nothing answered: no error
  // An acknowledged version: the ack check_no_refusal reads is the one await_ack returns on.
  // The subscriber's reply may still be on its way after it was sent: asked again until it has arrived.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto until_arrived = [&](const std::function<bool()>& arrived) {
    while (!arrived() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  f.serve(1);
  pub.post(encode_weights(params, 1, 1 << 20));
  f.server.join();
  until_arrived([&] {
    pub.check_no_refusal(1);
    return pub.ack_read_early().has_value();
  });
  ASSERT_EQ(pub.ack_read_early(), std::optional<int64_t>(1));
  pub.await_ack(1);  // the subscriber answers nothing more: only the kept ack lets this return
  EXPECT_FALSE(pub.ack_read_early().has_value());
  EXPECT_EQ(pub.last_version(), 1);
  EXPECT_EQ(f.sub.version(), 1);
  // A refused version (not newer than the subscriber's): the refusal is thrown naming the endpoint and version.
  f.serve(1);
  pub.post(encode_weights(params, 1, 1 << 20));
  f.server.join();
  std::string refusal;
  until_arrived([&] {
    try {
      pub.check_no_refusal(1);
    } catch (const Error& e) {
      refusal = e.what();
    }
    return !refusal.empty();
  });
  EXPECT_NE(refusal.find(pub.endpoint() + " refused version 1"), std::string::npos) << refusal;
  EXPECT_EQ(f.outcomes, (std::vector<bool>{true, false}));
}

TEST(WeightSyncCudaIpc, TheExportIsOfGpuMemory) {
  try {
    CudaIpcWeightExport exported(ExecContext::cpu(), small_config());
    ADD_FAILURE() << "an export of host memory was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the trainer's weights are on cpu"), std::string::npos) << e.what();
  }
}

TEST(WeightSyncInproc, PublishIsAVersionBumpOnTheSharedBuffer) {
  const ModelConfig cfg = small_config();
  ParameterStore trainer = init_random(cfg, 17);
  ParameterStore engine_view = trainer;  // shares the buffer
  InprocWeightChannel channel(trainer, 0);
  EXPECT_EQ(channel.poll(engine_view), -1);
  trainer.flat().data<float>()[3] = 42.0f;
  channel.publish(1);
  EXPECT_EQ(channel.poll(engine_view), 1);
  EXPECT_EQ(channel.acknowledged_version(), 1);
  EXPECT_EQ(engine_view.flat().data<float>()[3], 42.0f);
  EXPECT_EQ(channel.poll(engine_view), -1);
  EXPECT_THROW(channel.publish(1), Error);
  const ParameterStore copy = trainer.clone();
  EXPECT_THROW(channel.poll(copy), Error);  // a separate buffer cannot use the no-copy channel
}

}  // namespace
}  // namespace rlcpp
