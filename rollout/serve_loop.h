// `rlcpp serve`'s engine loop: one thread owns the Engine and a Scheduler and runs the continuous batch; HTTP
// handler threads hand it jobs (ServeLoop::submit) and read each job's tokens as they are sampled
// (ServeJob::wait). Between steps the loop admits new jobs (a request's n choices as one group, sharing its
// prompt's prefill and, through the prefix cache, any prefix computed before) and drops the sequences of
// cancelled jobs (a client that went away), whose blocks go back at once. A choice whose text reaches one of the
// request's stop strings ends at the token that completed it (rollout/stop_strings.h). A failing step fails the jobs in
// flight (500) and the loop goes on; nothing a request does stops the server.
// ServeHttp hands requests to a ServeJobQueue: this loop, or in an RL run's harness mode the loop of its
// sessions' turns (loop/session_turn_loop.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rollout/engine.h"
#include "rollout/serve_request.h"
#include "rollout/serve_sessions.h"
#include "tokenizer/tokenizer.h"

namespace rlcpp {

// One sampled token of one choice.
struct ChoiceToken {
  int32_t choice = 0;
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

// What a job has produced since the last wait.
struct JobUpdate {
  std::vector<ChoiceToken> tokens;
  std::vector<std::pair<int32_t, FinishReason>> finished;  // (choice, why) of the choices that ended
  bool done = false;    // every choice has ended (or the job failed)
  std::string error;    // the engine failed while this job ran
};

// A request in the server: the HTTP thread creates and reads it, the loop fills it.
class ServeJob {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ServeJob(CompletionRequest request, std::optional<SessionTurnPlan> session = std::nullopt);

  const CompletionRequest& request() const { return request_; }
  // The session turn it is (harness mode), or null.
  const SessionTurnPlan* session() const { return session_ ? &*session_ : nullptr; }
  Clock::time_point received() const { return received_; }
  // Blocks until something new arrives, the job is done, or `timeout`; returns what arrived.
  JobUpdate wait(std::chrono::milliseconds timeout);
  // The client went away: the loop drops its sequences before its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // The loop's side.
  void push_token(ChoiceToken token);
  void finish_choice(int32_t choice, FinishReason reason);
  void fail(const std::string& message);

 private:
  const CompletionRequest request_;
  const std::optional<SessionTurnPlan> session_;
  const Clock::time_point received_;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  JobUpdate pending_;
  int64_t choices_left_;
};

// A Prometheus histogram of seconds: counts per upper bound (cumulative when written), sum and count.
struct SecondsHistogram {
  static constexpr double kBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  int64_t buckets[std::size(kBounds)] = {};  // observations <= kBounds[i] and > kBounds[i - 1]
  double sum = 0;
  int64_t count = 0;
  void observe(double seconds);
};

// Counters of the loop for /metrics (a copy taken after a step).
struct ServeLoopFigures {
  RolloutStats stats;  // summed over the loop's life
  int64_t running_sequences = 0, waiting_sequences = 0, jobs_in_flight = 0;
  int64_t blocks_total = 0, blocks_used = 0, blocks_cached = 0;
  int64_t jobs_done = 0, jobs_failed = 0, jobs_cancelled = 0;
  int64_t jobs_held = 0;  // harness session turns waiting for the next draw
  SecondsHistogram ttft;  // a request's arrival to its first token
  SecondsHistogram tpot;  // a finished choice's time per output token after its first
  double busy_s = 0;      // wall time in engine steps
  bool prefix_cache = false;
};

// Where the HTTP front (rollout/serve_http.h) hands its jobs.
class ServeJobQueue {
 public:
  virtual ~ServeJobQueue() = default;
  // Queues `job`; throws ServeError 503 once the queue has stopped.
  virtual void submit(std::shared_ptr<ServeJob> job) = 0;
  virtual ServeLoopFigures figures() const = 0;
};

class ServeLoop final : public ServeJobQueue {
 public:
  // Starts the loop's thread; `tok` decodes choices' text to find their stop strings; both must outlive it.
  ServeLoop(Engine& engine, const Tokenizer& tok);
  ~ServeLoop() override;                // stops it; jobs still in flight fail
  ServeLoop(const ServeLoop&) = delete;
  ServeLoop& operator=(const ServeLoop&) = delete;

  // Queues `job` for the next step. Throws ServeError 503 once the loop has stopped.
  void submit(std::shared_ptr<ServeJob> job) override;
  ServeLoopFigures figures() const override;

 private:
  struct Active;
  void run();
  // Between steps: new jobs into the scheduler, cancelled ones out.
  void admit_and_drop(Scheduler& scheduler, std::vector<std::unique_ptr<Active>>& active);
  // Hands each sampled token to its job; a choice whose text reached a stop string ends there (dropped from
  // `scheduler`, its blocks back at once).
  void deliver(const std::vector<SampledRow>& rows, Scheduler& scheduler, std::vector<std::unique_ptr<Active>>& active);
  // Copies the counters /metrics shows into figures_.
  void publish(const Scheduler& scheduler, const RolloutStats& stats, double busy_s);

  Engine& engine_;
  const Tokenizer& tok_;
  mutable std::mutex mutex_;  // guards incoming_, stopping_, figures_
  std::condition_variable wake_;
  std::deque<std::shared_ptr<ServeJob>> incoming_;
  bool stopping_ = false;
  ServeLoopFigures figures_;
  std::thread thread_;
};

}  // namespace rlcpp
