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
// what `rlcpp generate --prompt` with that seed samples) and how many are still going.
struct ServeLoop::Active {
  std::shared_ptr<ServeJob> job;
  std::vector<std::unique_ptr<Sequence>> owned;
  std::vector<Sequence*> sequences;
  std::vector<StopStringWatch> stop_watches;  // one per choice when the request has stop strings
  int64_t left = 0;
  bool first_token = false;
};

ServeLoop::ServeLoop(Engine& engine, const Tokenizer& tok) : engine_(engine), tok_(tok) {
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

void ServeLoop::admit_and_drop(Scheduler& scheduler, std::vector<std::unique_ptr<Active>>& active) {
  std::deque<std::shared_ptr<ServeJob>> fresh;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fresh.swap(incoming_);
  }
  for (auto& job : fresh) {
    auto a = std::make_unique<Active>();
    a->job = job;
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
  int64_t cancelled = 0;
  std::erase_if(active, [&](const std::unique_ptr<Active>& a) {
    if (!a->job->cancelled()) return false;
    for (Sequence* seq : a->sequences)
      if (seq->status() != SequenceStatus::kFinished) scheduler.drop(seq);
    ++cancelled;
    return true;
  });
  if (cancelled > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    figures_.jobs_cancelled += cancelled;
    figures_.jobs_in_flight -= cancelled;
  }
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

void ServeLoop::publish(const Scheduler& scheduler, const RolloutStats& stats, double busy_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  figures_.stats = stats;
  figures_.busy_s = busy_s;
  figures_.stats.preemptions = scheduler.num_preemptions();
  figures_.running_sequences = scheduler.num_running();
  figures_.waiting_sequences = scheduler.num_waiting();
  figures_.blocks_used = engine_.blocks().num_used();
  figures_.blocks_cached = engine_.blocks().num_cached_blocks();
}

void ServeLoop::run() {
  Scheduler scheduler = engine_.new_scheduler();
  std::vector<std::unique_ptr<Active>> active;
  RolloutStats stats;
  const Stopwatch clock;
  double busy_s = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !incoming_.empty() || scheduler.has_work(); });
      if (stopping_) break;
    }
    admit_and_drop(scheduler, active);
    if (scheduler.has_work()) {
      const Stopwatch step_clock;
      try {
        const std::vector<SampledRow>& rows = engine_.step(scheduler, stats, clock);
        busy_s += step_clock.seconds();
        deliver(rows, scheduler, active);
      } catch (const std::exception& e) {
        // The step's sequences are in an unknown state: every job in flight fails, their blocks go back.
        const std::string why = std::string("the engine failed: ") + e.what();
        scheduler.drop_all();
        for (const auto& a : active) a->job->fail(why);
        std::lock_guard<std::mutex> lock(mutex_);
        figures_.jobs_failed += static_cast<int64_t>(active.size());
        figures_.jobs_in_flight -= static_cast<int64_t>(active.size());
        active.clear();
      }
    }
    publish(scheduler, stats, busy_s);
  }
  scheduler.drop_all();
  for (const auto& a : active) a->job->fail("the server is shutting down");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& job : incoming_) job->fail("the server is shutting down");
}

}  // namespace rlcpp
