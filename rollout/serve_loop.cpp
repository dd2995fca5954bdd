#include "rollout/serve_loop.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "core/metrics.h"
#include "rollout/stop_strings.h"

namespace rlcpp {

void SecondsHistogram::observe(double seconds) {
  size_t i = 0;
  while (i < std::size(kBounds) && seconds > kBounds[i]) ++i;
  if (i < std::size(kBounds)) ++buckets[i];  // past the last bound: only in +Inf (count)
  sum += seconds;
  ++count;
}

ServeJob::ServeJob(CompletionRequest request, std::optional<SessionTurnPlan> session)
    : request_(std::move(request)), session_(std::move(session)), received_(Clock::now()), choices_left_(request_.n) {}

JobUpdate ServeJob::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] {
    return !pending_.tokens.empty() || !pending_.finished.empty() || pending_.done;
  });
  JobUpdate out;
  out.done = pending_.done;
  out.error = pending_.error;
  out.tokens.swap(pending_.tokens);
  out.finished.swap(pending_.finished);
  return out;
}

void ServeJob::push_token(ChoiceToken token) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.tokens.push_back(std::move(token));
  }
  changed_.notify_all();
}

void ServeJob::finish_choice(int32_t choice, FinishReason reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.finished.emplace_back(choice, reason);
    if (--choices_left_ == 0) pending_.done = true;
  }
  changed_.notify_all();
}

void ServeJob::fail(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.error = message;
    pending_.done = true;
  }
  changed_.notify_all();
}

// A job the loop is running: its sequences (choice i = sample_index i, prompt id 0, so a seeded request samples
// what `rlcpp generate --prompt` with that seed samples; a session's turn: its one sequence, the engine's) and how
// many are still going.
struct ServeLoop::Active {
  std::shared_ptr<ServeJob> job;
  std::vector<std::unique_ptr<Sequence>> owned;
  std::vector<Sequence*> sequences;
  int64_t engine_session = -1;
  std::vector<StopStringWatch> stop_watches;  // one per choice when the request has stop strings
  int64_t left = 0;
  bool first_token = false;
};

ServeLoop::ServeLoop(Engine& engine, const Tokenizer& tok, ServeSessions* sessions)
    : engine_(engine), tok_(tok), sessions_(sessions) {
  figures_.blocks_total = engine_.blocks().num_blocks();
  figures_.prefix_cache = engine_.blocks().prefix_cache();
  thread_ = std::thread([this] { run(); });
}

ServeLoop::~ServeLoop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ServeLoop::submit(std::shared_ptr<ServeJob> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw ServeError(503, "", "the server is shutting down");
    incoming_.push_back(std::move(job));
    ++figures_.jobs_in_flight;
  }
  wake_.notify_all();
}

ServeLoopFigures ServeLoop::figures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return figures_;
}

void ServeLoop::pause() {
  std::unique_lock<std::mutex> lock(mutex_);
  paused_ = true;
  parked_changed_.wait(lock, [&] { return parked_ || stopping_; });
}

void ServeLoop::resume() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = false;
    retry_held_ = true;
  }
  wake_.notify_all();
}

void ServeLoop::restart_counters() {
  std::lock_guard<std::mutex> lock(mutex_);
  RLCPP_CHECK(paused_ && parked_, "serve loop: counters restarted while it steps");
  stats_ = RolloutStats();
  busy_s_ = 0;
  figures_.stats = stats_;
  figures_.busy_s = 0;
}

void ServeLoop::admit_and_drop(Scheduler& scheduler, std::vector<std::unique_ptr<Active>>& active) {
  // Held turns first, in the order they came, then new jobs.
  std::deque<std::shared_ptr<ServeJob>> fresh = std::exchange(held_, {});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fresh.insert(fresh.end(), incoming_.begin(), incoming_.end());
    incoming_.clear();
  }
  int64_t refused = 0, cancelled = 0;
  for (auto& job : fresh) {
    auto a = std::make_unique<Active>();
    a->job = job;
    if (const SessionTurnPlan* plan = job->session()) {
      if (job->cancelled()) {  // its client left while the turn was held: it never started
        sessions_->turn_failed(plan->key, "its client went away while its request waited for the next draw");
        job->fail("cancelled");
        ++cancelled;
        continue;
      }
      if (!sessions_->start_turn(plan->key)) {
        held_.push_back(job);
        continue;
      }
      try {
        admit_session_turn(*a, scheduler);
      } catch (const std::exception& e) {
        const std::string why = std::string("the engine refused the session's turn: ") + e.what();
        if (a->engine_session >= 0) engine_.abort_turn(a->engine_session);
        sessions_->turn_failed(plan->key, why);
        job->fail(why);
        ++refused;
        continue;
      }
      active.push_back(std::move(a));
      continue;
    }
    const CompletionRequest& r = job->request();
    std::vector<Sequence*> group;
    for (int64_t i = 0; i < r.n; ++i) {
      a->owned.push_back(std::make_unique<Sequence>(0, 0, 0, i, r.prompt));
      Sequence& seq = *a->owned.back();
      a->sequences.push_back(&seq);
      seq.sampling = &r.sampling;
      seq.num_top_logprobs = static_cast<int32_t>(r.top_logprobs);
      group.push_back(&seq);
      if (!r.stop.empty()) a->stop_watches.emplace_back(r.stop, tok_);
    }
    a->left = r.n;
    scheduler.add_group(std::move(group));
    active.push_back(std::move(a));
  }
  std::erase_if(active, [&](const std::unique_ptr<Active>& a) {
    if (!a->job->cancelled()) return false;
    if (a->job->session()) {
      abandon_session_turn(*a, scheduler, "its client went away during the turn");
    } else {
      for (Sequence* seq : a->sequences)
        if (seq->status() != SequenceStatus::kFinished) scheduler.drop(seq);
    }
    ++cancelled;
    return true;
  });
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.jobs_cancelled += cancelled;
  figures_.jobs_failed += refused;
  figures_.jobs_in_flight -= cancelled + refused;
  figures_.jobs_held = static_cast<int64_t>(held_.size());
}

void ServeLoop::admit_session_turn(Active& a, Scheduler& scheduler) {
  const SessionTurnPlan& plan = *a.job->session();
  const CompletionRequest& r = a.job->request();
  int64_t id = plan.engine_session;
  if (id < 0) {
    id = engine_.open_session(plan.spec);
    sessions_->opened(plan.key, id);
  }
  a.engine_session = id;
  if (!plan.append.empty()) engine_.append(id, plan.append);
  Sequence& seq = engine_.begin_turn({id, r.sampling});
  seq.num_top_logprobs = static_cast<int32_t>(r.top_logprobs);
  a.sequences.push_back(&seq);
  a.left = 1;
  if (seq.num_output() == 0 && seq.block_table.empty())
    scheduler.add_group({&seq});
  else
    scheduler.add_continuation(&seq);
}

void ServeLoop::abandon_session_turn(Active& a, Scheduler& scheduler, const std::string& why) {
  Sequence* seq = a.sequences.front();
  if (seq->status() != SequenceStatus::kFinished) scheduler.drop(seq);
  engine_.abort_turn(a.engine_session);
  sessions_->turn_failed(a.job->session()->key, why);
}

void ServeLoop::deliver(const std::vector<SampledRow>& rows, Scheduler& scheduler,
                        std::vector<std::unique_ptr<Active>>& active) {
  std::unordered_map<const Sequence*, std::pair<Active*, int32_t>> owner;
  for (const auto& a : active)
    for (size_t i = 0; i < a->sequences.size(); ++i) owner[a->sequences[i]] = {a.get(), static_cast<int32_t>(i)};
  // A request's times are in the figures before its client can see the token or the end they measure: a /metrics
  // read after a response counts it.
  auto observe = [&](SecondsHistogram ServeLoopFigures::*histogram, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    (figures_.*histogram).observe(seconds);
  };
  int64_t done = 0;
  for (const SampledRow& r : rows) {
    const auto [a, choice] = owner.at(r.sequence);
    if (!a->first_token) {
      a->first_token = true;
      observe(&ServeLoopFigures::ttft,
              std::chrono::duration<double>(ServeJob::Clock::now() - a->job->received()).count());
    }
    a->job->push_token({choice, r.token, r.logprob, r.top});
    const bool stopped = !a->stop_watches.empty() && a->stop_watches[static_cast<size_t>(choice)].add(r.token);
    if (stopped && r.sequence->status() != SequenceStatus::kFinished) {
      scheduler.drop(r.sequence);
      r.sequence->finish(FinishReason::kStop);
      a->job->finish_choice(choice, FinishReason::kStop);
      --a->left;
    } else if (r.sequence->status() == SequenceStatus::kFinished) {
      const Sequence& seq = *r.sequence;  // its times are the loop clock's
      if (seq.num_output() > 1)
        observe(&ServeLoopFigures::tpot, (seq.finished_s - seq.first_token_s) / (seq.num_output() - 1));
      // A session's turn is in its book before its client can read the end (and send the next request).
      if (const SessionTurnPlan* plan = a->job->session()) sessions_->turn_done(*plan, engine_.end_turn(a->engine_session));
      a->job->finish_choice(choice, stopped ? FinishReason::kStop : r.sequence->finish_reason());
      --a->left;
    }
  }
  std::erase_if(active, [&](const std::unique_ptr<Active>& a) {
    if (a->left > 0) return false;
    ++done;
    return true;
  });
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.jobs_done += done;
  figures_.jobs_in_flight -= done;
}

void ServeLoop::publish(const Scheduler& scheduler) {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.stats = stats_;
  figures_.busy_s = busy_s_;
  figures_.stats.preemptions = scheduler.num_preemptions();
  figures_.running_sequences = scheduler.num_running();
  figures_.waiting_sequences = scheduler.num_waiting();
  figures_.blocks_used = engine_.blocks().num_used();
  figures_.blocks_cached = engine_.blocks().num_cached_blocks();
}

void ServeLoop::run() {
  Scheduler scheduler = engine_.new_scheduler();
  std::vector<std::unique_ptr<Active>> active;
  const Stopwatch clock;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      parked_ = true;
      parked_changed_.notify_all();
      wake_.wait(lock, [&] {
        return stopping_ || (!paused_ && (!incoming_.empty() || scheduler.has_work() || retry_held_));
      });
      parked_ = false;
      retry_held_ = false;
      if (stopping_) break;
    }
    admit_and_drop(scheduler, active);
    if (scheduler.has_work()) {
      const Stopwatch step_clock;
      try {
        const std::vector<SampledRow>& rows = engine_.step(scheduler, stats_, clock);
        busy_s_ += step_clock.seconds();
        deliver(rows, scheduler, active);
      } catch (const std::exception& e) {
        // The step's sequences are in an unknown state: every job in flight fails, their blocks go back.
        const std::string why = std::string("the engine failed: ") + e.what();
        scheduler.drop_all();
        for (const auto& a : active) {
          if (a->job->session()) abandon_session_turn(*a, scheduler, why);
          a->job->fail(why);
        }
        std::lock_guard<std::mutex> lock(mutex_);
        figures_.jobs_failed += static_cast<int64_t>(active.size());
        figures_.jobs_in_flight -= static_cast<int64_t>(active.size());
        active.clear();
      }
    }
    publish(scheduler);
  }
  scheduler.drop_all();
  for (const auto& a : active) {
    if (a->job->session()) abandon_session_turn(*a, scheduler, "the server shut down during the turn");
    a->job->fail("the server is shutting down");
  }
  for (const auto& job : held_) {
    sessions_->turn_failed(job->session()->key, "the server shut down while the turn waited for the next draw");
    job->fail("the server is shutting down");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& job : incoming_) job->fail("the server is shutting down");
}

}  // namespace rlcpp
