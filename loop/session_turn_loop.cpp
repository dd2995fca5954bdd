#include "loop/session_turn_loop.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/metrics.h"

namespace rlcpp {

namespace {

TurnResult turn_result(const TurnReply& reply) {
  TurnResult r;
  r.tokens = reply.tokens;
  r.logprobs = reply.logprobs;
  r.finish_reason = reply.ended ? FinishReason::kEos : FinishReason::kLength;
  r.policy_version = reply.policy_version;
  r.prefilled_tokens = reply.prefilled_tokens;
  r.recomputed_tokens = reply.recomputed_tokens;
  return r;
}

}  // namespace

SessionTurnLoop::SessionTurnLoop(ServeSessions& book) : book_(book) {
  thread_ = std::thread([this] { run(); });
}

SessionTurnLoop::~SessionTurnLoop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto* jobs : {&held_, &incoming_})
    for (const auto& job : *jobs) {
      book_.turn_failed(job->session()->key, "the server shut down before the turn ran");
      job->fail("the server is shutting down");
    }
}

void SessionTurnLoop::submit(std::shared_ptr<ServeJob> job) {
  RLCPP_CHECK(job->session(), "session turn loop: a job without a session");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw ServeError(503, "", "the server is shutting down");
    incoming_.push_back(std::move(job));
    ++figures_.jobs_in_flight;
  }
  wake_.notify_all();
}

ServeLoopFigures SessionTurnLoop::figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return figures_;
}

void SessionTurnLoop::begin_draw(RolloutTurnEngine& engine) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    RLCPP_CHECK(engine_ == nullptr, "session turn loop: a draw begun twice");
    engine_ = &engine;
    retry_held_ = true;
    figures_.stats = engine.stats();
    figures_.busy_s = 0;
  }
  wake_.notify_all();
}

void SessionTurnLoop::end_draw() {
  RolloutTurnEngine* engine = nullptr;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    engine = std::exchange(engine_, nullptr);  // no round starts after this
    idle_changed_.wait(lock, [&] { return !in_round_; });
  }
  if (!engine) return;
  for (const auto& [key, id] : book_.engine_sessions()) engine->close(id);
  book_.forget_engine_sessions();
}

void SessionTurnLoop::run() {
  while (true) {
    std::deque<std::shared_ptr<ServeJob>> jobs;
    RolloutTurnEngine* engine = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (engine_ && (!incoming_.empty() || retry_held_)); });
      if (stopping_) break;
      if (std::exchange(retry_held_, false)) jobs = std::exchange(held_, {});  // the book's draw changed
      jobs.insert(jobs.end(), incoming_.begin(), incoming_.end());
      incoming_.clear();
      engine = engine_;  // the draw's until the round ends (end_draw waits for it)
      in_round_ = true;
    }
    round(*engine, std::move(jobs));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_round_ = false;
    }
    idle_changed_.notify_all();
  }
}

void SessionTurnLoop::round(RolloutTurnEngine& engine, std::deque<std::shared_ptr<ServeJob>> jobs) {
  std::vector<std::shared_ptr<ServeJob>> running;
  std::vector<TurnAsk> asks;
  int64_t cancelled = 0, failed = 0, done = 0;
  std::deque<std::shared_ptr<ServeJob>> held;
  for (auto& job : jobs) {
    const SessionTurnPlan& plan = *job->session();
    const auto kept = turn_sampled_.find(job.get());
    if (job->cancelled()) {  // its client left while the turn waited
      book_.turn_failed(plan.key, "its client went away while its turn waited for the next draw");
      job->fail("cancelled");
      if (kept != turn_sampled_.end()) turn_sampled_.erase(kept);
      ++cancelled;
      continue;
    }
    // A kept turn goes on (it began in an earlier draw); a new one may be past the session's turns or tokens.
    if (kept == turn_sampled_.end() && !book_.start_turn(plan.key)) {
      held.push_back(job);
      continue;
    }
    try {
      int64_t id = book_.engine_session(plan.key);
      if (id < 0) {  // new, or carried from an earlier draw's engine: opened with its history
        const SessionRecord rec = book_.record(plan.key);
        id = engine.open(rec.opened() ? rec.prompt : plan.spec.prompt, plan.spec.prompt_id, plan.spec.sample_index);
        book_.opened(plan.key, id);
        if (!rec.tokens.empty()) engine.append(id, rec.tokens);
      }
      if (kept == turn_sampled_.end() && !plan.append.empty()) engine.append(id, plan.append);
      const int64_t left = job->request().sampling.max_new_tokens - (kept == turn_sampled_.end() ? 0 : kept->second);
      asks.push_back({id, std::min(left, book_.tokens_left(plan.key)), job->request().sampling.seed});
      running.push_back(job);
    } catch (const std::exception& e) {
      const std::string why = std::string("the engine refused the session's turn: ") + e.what();
      book_.turn_failed(plan.key, why);
      job->fail(why);
      if (kept != turn_sampled_.end()) turn_sampled_.erase(kept);
      ++failed;
    }
  }
  const Stopwatch clock;
  std::vector<TurnReply> replies;
  if (!asks.empty()) {
    try {
      replies = engine.run_turns(asks, {});
      RLCPP_CHECK(replies.size() == asks.size(), "the engine answered " << replies.size() << " of " << asks.size()
                                                                        << " turns");
    } catch (const std::exception& e) {
      const std::string why = std::string("the engine failed: ") + e.what();
      for (const auto& job : running) {
        book_.turn_failed(job->session()->key, why);
        job->fail(why);
        turn_sampled_.erase(job.get());
      }
      failed += static_cast<int64_t>(running.size());
      running.clear();
    }
  }
  const double busy_s = clock.seconds();
  for (size_t i = 0; i < running.size(); ++i) {
    ServeJob& job = *running[i];
    const TurnReply& reply = replies[i];
    const TurnResult result = turn_result(reply);
    const int64_t sampled = turn_sampled_[&job] += static_cast<int64_t>(reply.tokens.size());
    for (size_t t = 0; t < reply.tokens.size(); ++t) job.push_token({0, reply.tokens[t], reply.logprobs[t], {}});
    // Cut by the draw's tokens, neither ended nor at its request's limit: kept for the next draw.
    const bool cut = !reply.ended && static_cast<int64_t>(reply.tokens.size()) == asks[i].max_new_tokens &&
                     sampled < job.request().sampling.max_new_tokens;
    if (cut) {
      book_.turn_kept(*job.session(), result);
      held.push_back(running[i]);
      continue;
    }
    turn_sampled_.erase(&job);
    book_.turn_done(*job.session(), result);  // in the book before its client can read the end
    job.finish_choice(0, result.finish_reason);
    ++done;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  held_.insert(held_.end(), held.begin(), held.end());
  figures_.stats = engine.stats();
  figures_.busy_s += busy_s;
  figures_.jobs_done += done;
  figures_.jobs_failed += failed;
  figures_.jobs_cancelled += cancelled;
  figures_.jobs_in_flight -= done + failed + cancelled;
  figures_.jobs_held = static_cast<int64_t>(held_.size());
  figures_.running_sequences = static_cast<int64_t>(running.size());
}

}  // namespace rlcpp
