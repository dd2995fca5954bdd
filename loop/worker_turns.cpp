#include "loop/worker_turns.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "rollout/turns_wire.h"

namespace rlcpp {

namespace {

constexpr int kEngineIdShift = 40;  // session ids of the backend's n-th turn engine: n << 40, n << 40 + 1, ...

}  // namespace

WorkerTurns::WorkerTurns(WorkerClient& client, WorkerSupervisor* supervisor, WorkerSessionBook& book,
                         const SamplingParams& base, int64_t context)
    : client_(client),
      supervisor_(supervisor),
      book_(book),
      base_(base),
      context_(context),
      next_id_(book.engines++ << kEngineIdShift) {}

WorkerTurns::~WorkerTurns() = default;

int64_t WorkerTurns::open(const std::vector<int32_t>& prompt, uint64_t prompt_id, int64_t sample_index) {
  const int64_t id = next_id_++;
  Session& s = sessions_[id];
  s.spec = {prompt, prompt_id, sample_index};
  s.home = least_loaded();
  return id;
}

void WorkerTurns::append(int64_t session, const std::vector<int32_t>& tokens) {
  const auto it = sessions_.find(session);
  RLCPP_CHECK(it != sessions_.end(), "worker turns: append to session " << session << ", which is not open");
  it->second.history.insert(it->second.history.end(), tokens.begin(), tokens.end());
}

void WorkerTurns::close(int64_t session) {
  const auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  if (it->second.worker >= 0) book_.closes[static_cast<size_t>(it->second.worker)].push_back(session);
  sessions_.erase(it);
}

int WorkerTurns::least_loaded() const {
  const int W = client_.num_workers();
  std::vector<int64_t> load(static_cast<size_t>(W), 0);
  for (const auto& [id, s] : sessions_)
    if (s.home >= 0) ++load[static_cast<size_t>(s.home)];
  int best = -1;
  for (int w = 0; w < W; ++w)
    if (client_.serving(w) && (best < 0 || load[w] < load[best])) best = w;
  RLCPP_CHECK(best >= 0, "worker turns: no worker can serve (each one retired, or not admitted yet)");
  return best;
}

TurnsCall WorkerTurns::call_for(int w, const std::vector<int64_t>& sessions, const std::vector<TurnAsk>& asks,
                                const std::vector<int64_t>& stop_tokens) const {
  TurnsCall call;
  call.reset = !book_.reset[static_cast<size_t>(w)];
  call.sampling = base_;
  call.stop_tokens = stop_tokens;
  call.closes = book_.closes[static_cast<size_t>(w)];
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Session& s = sessions_.at(sessions[i]);
    size_t from = s.synced;
    if (s.worker != w) {  // new here: opened, its whole history appended
      call.opens.push_back({sessions[i], s.spec});
      from = 0;
    }
    if (from < s.history.size())
      call.appends.push_back({sessions[i], std::vector<int32_t>(s.history.begin() + static_cast<int64_t>(from),
                                                                s.history.end())});
    call.turns.push_back({sessions[i], asks[i].max_new_tokens, asks[i].seed});
  }
  return call;
}

std::vector<TurnReply> WorkerTurns::run_turns(const std::vector<TurnAsk>& asks,
                                              const std::vector<int64_t>& stop_tokens) {
  // Workers that joined a listening trainer since (remote placement) have their places in the book.
  book_.closes.resize(std::max(book_.closes.size(), static_cast<size_t>(client_.num_workers())));
  book_.reset.resize(std::max(book_.reset.size(), static_cast<size_t>(client_.num_workers())), false);
  // The asks by worker: each session's home (another one when its home no longer serves).
  std::map<int, std::vector<size_t>> by_home;
  for (size_t i = 0; i < asks.size(); ++i) {
    const auto it = sessions_.find(asks[i].session);
    RLCPP_CHECK(it != sessions_.end(), "worker turns: a turn of session " << asks[i].session << ", which is not open");
    Session& s = it->second;
    if (!client_.serving(s.home)) {
      s.home = -1;
      s.home = least_loaded();
    }
    by_home[s.home].push_back(i);
  }
  std::vector<TurnReply> replies(asks.size());
  std::vector<RolloutStats> calls;  // one per job, the workers side by side
  std::vector<WorkerJob> jobs;
  for (const auto& entry : by_home) {
    const int home = entry.first;
    const std::vector<size_t>& indices = entry.second;  // a reference, not a structured binding: lambdas capture it
    std::vector<int64_t> sessions;
    std::vector<TurnAsk> mine;
    for (size_t i : indices) {
      sessions.push_back(asks[i].session);
      mine.push_back(asks[i]);
    }
    WorkerJob job;
    job.home = home;
    job.size = static_cast<int64_t>(indices.size());
    job.unit = "session turns";
    job.reply_type = "turns_result";
    job.message = [this, sessions, mine, &stop_tokens](int w, uint64_t request_id) {
      return encode_turns_request(call_for(w, sessions, mine, stop_tokens), request_id);
    };
    job.done = [this, sessions, &indices, &replies, &calls](int w, const WireMessage& reply) {
      uint64_t id = 0;
      TurnsResult result = decode_turns_result(reply, id);
      if (result.turns.size() != sessions.size())
        throw WireError("a turns_result of " + std::to_string(result.turns.size()) + " turns for " +
                        std::to_string(sessions.size()) + " asked");
      book_.reset[static_cast<size_t>(w)] = true;
      book_.closes[static_cast<size_t>(w)].clear();
      for (size_t k = 0; k < sessions.size(); ++k) {
        Session& s = sessions_.at(sessions[k]);
        const TurnResult& t = result.turns[k];
        s.history.insert(s.history.end(), t.tokens.begin(), t.tokens.end());
        s.home = s.worker = w;
        s.synced = s.history.size();
        replies[indices[k]] = turn_reply(t);
      }
      calls.push_back(result.stats);
    };
    job.lost = [this](int w) {
      // Its sessions' K/V went with it: each opens again, with its history, where it runs next.
      for (auto& [id, s] : sessions_)
        if (s.worker == w) {
          s.worker = -1;
          s.synced = 0;
        }
      book_.closes[static_cast<size_t>(w)].clear();
    };
    jobs.push_back(std::move(job));
  }
  client_.run_jobs(jobs, supervisor_);

  std::optional<RolloutStats> call;
  for (const RolloutStats& c : calls) {
    if (call)
      call->merge(c);
    else
      call = c;
  }
  if (call) {
    if (first_)
      stats_ = *call;
    else
      stats_.then(*call);
    first_ = false;
  }
  return replies;
}

}  // namespace rlcpp
