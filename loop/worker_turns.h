// Multi-turn episodes on worker processes (rollout.placement "split" or "remote"): the episode runner's
// TurnEngine (agent/episode_runner.h) over the worker protocol's session turns (rollout/turns_wire.h). Each
// episode is a session of one worker's engine, its K/V kept there between turns; an episode's first session goes
// to the worker holding the fewest. A call of run_turns sends each worker one "turns" message (its sessions'
// opens, appended observations and turns; the closes since its last call) and the workers run them side by
// side. A worker that fails mid-call (WorkerClient::run_jobs: killed, silent, exited) is replaced or retired by
// its backend as for generate, and every session it held moves: opened again on the worker that takes the job,
// with its whole history appended (computed again), so that it samples what it would have sampled (draws keyed
// by seed, prompt id, sample index and position; batch-invariant log-probs): the episodes equal a colocated
// run's, bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "loop/engine_turns.h"
#include "rollout/worker_client.h"

namespace rlcpp {

// What a backend keeps between its turn engines (one per draw): closes not yet sent, by worker, and whether a
// worker has been told to drop the sessions of an earlier trainer.
struct WorkerSessionBook {
  std::vector<std::vector<int64_t>> closes;  // by worker
  std::vector<bool> reset;                   // by worker: sent
  int64_t engines = 0;                       // turn engines made (their session ids apart)
};

class WorkerTurns final : public RolloutTurnEngine {
 public:
  // `client`, `supervisor` (may be null) and `book` must outlive it; `context`: the model's context length.
  WorkerTurns(WorkerClient& client, WorkerSupervisor* supervisor, WorkerSessionBook& book, const SamplingParams& base,
              int64_t context);
  ~WorkerTurns() override;  // closes not sent go back to the book (the next engine sends them)

  int64_t open(const std::vector<int32_t>& prompt, uint64_t prompt_id, int64_t sample_index) override;
  void append(int64_t session, const std::vector<int32_t>& tokens) override;
  std::vector<TurnReply> run_turns(const std::vector<TurnAsk>& asks, const std::vector<int64_t>& stop_tokens) override;
  void close(int64_t session) override;
  int64_t context() const override { return context_; }
  const RolloutStats& stats() const override { return stats_; }

 private:
  struct Session {
    SessionSpec spec;
    std::vector<int32_t> history;  // every token after the prompt: appended and sampled
    int home = -1;                 // the worker it runs on
    int worker = -1;               // where its K/V lives; -1: nowhere yet (new, or its worker failed)
    size_t synced = 0;             // history tokens that worker holds
  };
  // The serving worker that is home to the fewest sessions.
  int least_loaded() const;
  // Worker w's call for `sessions` (their opens, appends, then a turn each), with its pending closes.
  TurnsCall call_for(int w, const std::vector<int64_t>& sessions, const std::vector<TurnAsk>& asks,
                     const std::vector<int64_t>& stop_tokens) const;

  WorkerClient& client_;
  WorkerSupervisor* supervisor_;
  WorkerSessionBook& book_;
  SamplingParams base_;
  int64_t context_;
  int64_t next_id_;
  std::map<int64_t, Session> sessions_;
  RolloutStats stats_;
  bool first_ = true;
};

}  // namespace rlcpp
