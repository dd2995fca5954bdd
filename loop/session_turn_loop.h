// The server's loop in an RL run's harness mode (loop/harness_rollout.h): each request is a turn of an episode's
// session (rollout/serve_sessions.h), run on the placement's turn engine (loop/engine_turns.h: the colocated
// engine, or the split or remote workers, the interface in-process episodes use). A thread gathers the requests
// waiting, opens the sessions the draw's engine does not hold yet (a session carried from an earlier draw is
// opened again with its history: its K/V of an older version would be computed again anyway), appends each
// request's additions, runs the turns in one call (the engine batches them continuously), records each in the
// book and hands its tokens to its client; then the next round. A turn the book does not let start (past its
// session's turns or tokens for the draw) is held, its client waiting, until a later draw; a turn that reaches the
// session's tokens for the draw is kept, its request open, and goes on in the next draw (its session opened there
// with the history, the turn's first part included). Between draws the loop has no engine: requests wait, and the
// run updates and syncs the weights.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loop/engine_turns.h"
#include "rollout/serve_loop.h"
#include "rollout/serve_sessions.h"

namespace rlcpp {

class SessionTurnLoop final : public ServeJobQueue {
 public:
  // `book` must outlive it. The loop starts with no engine (as between draws).
  explicit SessionTurnLoop(ServeSessions& book);
  ~SessionTurnLoop() override;  // jobs still waiting fail
  SessionTurnLoop(const SessionTurnLoop&) = delete;
  SessionTurnLoop& operator=(const SessionTurnLoop&) = delete;

  void submit(std::shared_ptr<ServeJob> job) override;
  ServeLoopFigures figures() const override;

  // A draw begins: turns run on `engine` (it must outlive the next end_draw) from now on, held ones first; the
  // figures' stats and busy time count from here.
  void begin_draw(RolloutTurnEngine& engine);
  // The draw ends: waits for the round in progress, closes the sessions the engine opened (the book forgets
  // them) and lets the engine go. Requests arriving meanwhile wait for the next draw.
  void end_draw();

 private:
  void run();
  // One round on the draw's `engine`: the jobs waiting that may start, run as one call of the engine's.
  void round(RolloutTurnEngine& engine, std::deque<std::shared_ptr<ServeJob>> jobs);

  ServeSessions& book_;
  mutable std::mutex mutex_;  // guards everything below but held_ (the loop thread's)
  std::condition_variable wake_, idle_changed_;
  std::deque<std::shared_ptr<ServeJob>> incoming_;
  std::deque<std::shared_ptr<ServeJob>> held_;  // turns not begun, and turns kept (in turn_sampled_)
  std::map<const ServeJob*, int64_t> turn_sampled_;  // a kept turn's tokens so far (the loop thread's)
  RolloutTurnEngine* engine_ = nullptr;
  bool stopping_ = false;
  bool in_round_ = false;
  bool retry_held_ = false;
  ServeLoopFigures figures_;
  std::thread thread_;
};

}  // namespace rlcpp
