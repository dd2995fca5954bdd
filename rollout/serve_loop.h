// `rlcpp serve`'s engine loop: one thread owns the Engine and a Scheduler and runs the continuous batch; HTTP
// handler threads hand it jobs (ServeLoop::submit) and read each job's tokens as they are sampled
// (ServeJob::wait). Between steps the loop admits new jobs (a request's n choices as one group, sharing its
// prompt's prefill and, through the prefix cache, any prefix computed before) and drops the sequences of
// cancelled jobs (a client that went away), whose blocks go back at once. A choice whose text reaches one of the
// request's stop strings ends at the token that completed it (rollout/stop_strings.h). A failing step fails the jobs in
// flight (500) and the loop goes on; nothing a request does stops the server.
// A session's request (harness mode, rollout/serve_sessions.h) runs as a turn of one of the engine's sessions
// instead: opened on its first request, its additions appended, its turn added to the batch on the blocks it kept
// (Engine::begin_turn / end_turn), and recorded in the book before its client sees the end. A turn the book does
// not let start yet (past its session's turns for the draw) is held, its client waiting, until a later draw.
// Between an RL run's draws the loop is paused: it steps nothing, and the run may change the engine's weights.
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
  int64_t jobs_held = 0;  // session turns waiting for the next draw
  SecondsHistogram ttft;  // a request's arrival to its first token
  SecondsHistogram tpot;  // a finished choice's time per output token after its first
  double busy_s = 0;      // wall time in engine steps
  bool prefix_cache = false;
};

class ServeLoop {
 public:
  // Starts the loop's thread; `tok` decodes choices' text to find their stop strings; `sessions` (harness mode,
  // or null) is the book session requests are recorded in. Both must outlive it.
  ServeLoop(Engine& engine, const Tokenizer& tok, ServeSessions* sessions = nullptr);
  ~ServeLoop();                         // stops it; jobs still in flight fail
  ServeLoop(const ServeLoop&) = delete;
  ServeLoop& operator=(const ServeLoop&) = delete;

  // Queues `job` for the next step. Throws ServeError 503 once the loop has stopped.
  void submit(std::shared_ptr<ServeJob> job);
  ServeLoopFigures figures() const;

  // Stops stepping after the step in progress and returns once the loop's thread has let the engine go: until
  // resume() the caller may use the engine (an RL run changes its weights while no turn runs). Jobs still arrive
  // and wait.
  void pause();
  // Steps again (held turns retried first).
  void resume();
  // While paused: figures().stats and busy_s count from zero again (an RL draw's own).
  void restart_counters();

 private:
  struct Active;
  void run();
  // Between steps: new jobs into the scheduler, cancelled ones out.
  void admit_and_drop(Scheduler& scheduler, std::vector<std::unique_ptr<Active>>& active);
  // Hands each sampled token to its job; a choice whose text reached a stop string ends there (dropped from
  // `scheduler`, its blocks back at once).
  void deliver(const std::vector<SampledRow>& rows, Scheduler& scheduler, std::vector<std::unique_ptr<Active>>& active);
  // Copies the counters /metrics shows into figures_.
  void publish(const Scheduler& scheduler);
  // A session job's turn into `scheduler` (its session opened first, its additions appended).
  void admit_session_turn(Active& a, Scheduler& scheduler);
  // A session turn that will not end (its client left, the engine failed): out of the engine's batch, recorded.
  void abandon_session_turn(Active& a, Scheduler& scheduler, const std::string& why);

  Engine& engine_;
  const Tokenizer& tok_;
  ServeSessions* sessions_;
  mutable std::mutex mutex_;  // guards incoming_, stopping_, paused_, parked_, retry_held_, figures_ (and stats_,
                              // busy_s_ while parked)
  std::condition_variable wake_, parked_changed_;
  std::deque<std::shared_ptr<ServeJob>> incoming_;
  std::deque<std::shared_ptr<ServeJob>> held_;  // the loop thread's: turns the book holds for a later draw
  bool stopping_ = false;
  bool paused_ = false;
  bool parked_ = false;       // the loop's thread waits between steps
  bool retry_held_ = false;   // resumed: held turns may start
  ServeLoopFigures figures_;
  RolloutStats stats_;        // the loop thread's, since the start or restart_counters
  double busy_s_ = 0;
  std::thread thread_;
};

}  // namespace rlcpp
