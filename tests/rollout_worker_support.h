// What the worker tests share (rollout_worker_test, rollout_worker_curve_test): a small model, requests,
// worker options, workers serving on threads, and the comparison of two rollouts.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/curve.h"
#include "core/error.h"
#include "core/wire.h"
#include "core/philox.h"
#include "model/init.h"
#include "rollout/worker_client.h"
#include "rollout/worker_service.h"
#include "tests/test_models.h"

namespace rlcpp {

inline ModelConfig small_config() { return small_test_config("llama"); }

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  PhiloxStream rng(seed, 0);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

inline Request test_request(const ModelConfig& cfg, int prompts = 7) {
  Request r;
  for (int p = 0; p < prompts; ++p) r.prompts.push_back(random_tokens(2 + 3 * p, cfg.vocab_size, 70 + p));
  r.n = 3;
  r.sampling.max_new_tokens = 12;
  r.sampling.top_k = 10;
  r.sampling.seed = 99;
  return r;
}

inline WorkerOptions worker_options() {
  WorkerOptions o;
  o.engine.block_size = 4;
  o.engine.max_num_seqs = 64;
  o.engine.max_num_batched_tokens = 1024;
  o.heartbeat_interval_s = 0.05;
  return o;
}

// Workers serving on threads until stopped; the zmq context outlives them.
struct ThreadWorkers {
  ModelConfig cfg = small_config();
  ParameterStore params;
  Transformer model{cfg};
  zmq::context_t ctx;
  std::optional<ZapHandler> zap;  // for workers bound with CURVE; outlives their sockets
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<WorkerService>> services;
  std::vector<std::thread> threads;
  std::vector<std::string> endpoints;

  ThreadWorkers() : params(init_random(cfg, 5)) {
    for (int64_t i = 0; i < params.numel(); ++i) params.flat().data<float>()[i] *= 3.0f;
  }
  ~ThreadWorkers() {
    stop = true;
    for (auto& t : threads) t.join();
  }
  void bind(int count, const WorkerOptions& options = worker_options()) {
    for (int i = 0; i < count; ++i) {
      services.push_back(std::make_unique<WorkerService>(model, params, options));
      endpoints.push_back(services.back()->bind(ctx, "inproc://worker-" + std::to_string(endpoints.size())));
    }
    start();
  }
  void connect_to(const std::string& endpoint, int count, const WorkerOptions& options = worker_options()) {
    for (int i = 0; i < count; ++i) {
      services.push_back(std::make_unique<WorkerService>(model, params, options));
      services.back()->connect(ctx, endpoint);
    }
    start();
  }
  // Each thread holds its service's pointer, not an index: a later bind grows `services` while they run.
  void start() {
    for (size_t i = threads.size(); i < services.size(); ++i) {
      WorkerService* service = services[i].get();
      threads.emplace_back([this, service] { service->serve({&stop, -1}); });
    }
  }
};

inline void expect_same(const RolloutResult& a, const RolloutResult& b) {
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    ASSERT_EQ(a.samples[i].tokens, b.samples[i].tokens) << "sample " << i;
    EXPECT_EQ(a.samples[i].prompt_index, b.samples[i].prompt_index);
    EXPECT_EQ(a.samples[i].sample_index, b.samples[i].sample_index);
    EXPECT_EQ(a.samples[i].finish_reason, b.samples[i].finish_reason);
    EXPECT_TRUE(a.samples[i].scoring == b.samples[i].scoring)
        << "sample " << i << ": " << a.samples[i].scoring.describe() << " vs " << b.samples[i].scoring.describe();
    for (size_t t = 0; t < a.samples[i].logprobs.size(); ++t)
      EXPECT_NEAR(a.samples[i].logprobs[t], b.samples[i].logprobs[t], 1e-5) << "sample " << i << " token " << t;
  }
}

// A raw DEALER for sending arbitrary frames to a bound worker.
struct RawClient {
  zmq::socket_t socket;
  RawClient(zmq::context_t& ctx, const std::string& endpoint) : socket(ctx, zmq::socket_type::dealer) {
    socket.connect(endpoint);
  }
  void send_frames(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::message_t m(frames[i].data(), frames[i].size());
      (void)socket.send(m, i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  void send(const WireMessage& m) { send_wire_message(socket, {}, m); }
  // The next message that is not a heartbeat.
  WireMessage reply() {
    ReceivedFrames got;
    while (true) {
      if (!receive_frames(socket, 0, WireLimits{}, 10000, got)) throw Error("no reply within 10 s");
      WireMessage m = decode_wire_message(got.frames, WireLimits{});
      if (m.type() != "heartbeat") return m;
    }
  }
};

inline std::vector<std::string> frames_of(const WireMessage& m) {
  std::vector<std::string> out;
  for (auto& f : encode_wire_message(m)) out.push_back(f.to_string());
  return out;
}

}  // namespace rlcpp
