// The engine's sessions (rollout/README.md "Sessions"): a sequence and its paged KV blocks kept between turns, the
// one multi-turn mechanism behind agent episodes (and, later, serve's sessions). Opening, appending tokens of known
// origin, running turns in one continuous batch, closing and timing out; the step itself is Engine::run_step.
#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/metrics.h"
#include "rollout/engine.h"

namespace rlcpp {

Engine::Session& Engine::find_session(int64_t session, const char* what) {
  const auto it = sessions_.find(session);
  RLCPP_CHECK(it != sessions_.end(), "engine: " << what << " of session " << session << ", which is not open ("
                                                << sessions_.size() << " sessions are)");
  return *it->second;
}

int64_t Engine::open_session(const SessionSpec& spec) {
  RLCPP_CHECK(!spec.prompt.empty(), "engine: a session's prompt is empty (it needs at least BOS)");
  const int64_t V = served_.vocab_size;
  for (size_t i = 0; i < spec.prompt.size(); ++i)
    RLCPP_CHECK(spec.prompt[i] >= 0 && spec.prompt[i] < V, "engine: session prompt token " << i << " is "
                                                                                           << spec.prompt[i]
                                                                                           << ", outside [0, " << V
                                                                                           << ")");
  RLCPP_CHECK(static_cast<int64_t>(spec.prompt.size()) < served_.max_position_embeddings,
              "engine: a session prompt of " << spec.prompt.size() << " tokens leaves no room in the context of "
                                             << served_.max_position_embeddings);
  RLCPP_CHECK(spec.sample_index >= 0 && spec.sample_index < (int64_t{1} << 32),
              "engine: session sample_index " << spec.sample_index << " must be in [0, 2^32)");
  auto s = std::make_unique<Session>();
  s->prompt = spec.prompt;
  const int64_t id = next_session_++;
  s->sequence = std::make_unique<Sequence>(id, 0, spec.prompt_id, spec.sample_index, s->prompt);
  s->sequence->keeps_blocks = true;
  s->sequence->sampling = &s->sampling;
  s->idle_since = std::chrono::steady_clock::now();
  sessions_.emplace(id, std::move(s));
  return id;
}

void Engine::append(int64_t session, std::span<const int32_t> tokens) {
  Session& s = find_session(session, "append");
  const int64_t V = served_.vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i)
    RLCPP_CHECK(tokens[i] >= 0 && tokens[i] < V, "engine: append to session " << session << ": token " << i << " is "
                                                                               << tokens[i] << ", outside [0, " << V
                                                                               << ")");
  RLCPP_CHECK(s.sequence->num_tokens() + static_cast<int64_t>(tokens.size()) < served_.max_position_embeddings,
              "engine: append to session " << session << ": " << s.sequence->num_tokens() << " + " << tokens.size()
                                           << " tokens leave no room for a turn in the context of "
                                           << served_.max_position_embeddings);
  s.sequence->append_external(tokens);
}

Sequence& Engine::begin_turn(const TurnRequest& turn) {
  Session& s = find_session(turn.session, "a turn");
  Sequence& seq = *s.sequence;
  turn.sampling.validate("engine: turn of session " + std::to_string(turn.session), served_.vocab_size);
  RLCPP_CHECK(seq.num_tokens() < served_.max_position_embeddings,
              "engine: session " << turn.session << " has filled the context (" << served_.max_position_embeddings
                                 << " tokens)");
  // K/V of an older policy version is never reused: the history is computed again with the current weights.
  if (!seq.block_table.empty() && s.kv_version != policy_version_) {
    std::erase(parked_, &seq);
    blocks_.release(seq);
  }
  s.sampling = turn.sampling;
  seq.begin_turn();
  s.kv_rows_before = seq.kv_rows;
  s.recomputed_before = seq.kv_rows_recomputed;
  return seq;
}

TurnResult Engine::end_turn(int64_t session) {
  Session& s = find_session(session, "the end of a turn");
  const Sequence& seq = *s.sequence;
  RLCPP_CHECK(seq.status() == SequenceStatus::kFinished,
              "engine: session " << session << " ended its turn " << sequence_status_name(seq.status()));
  s.kv_version = policy_version_;
  s.idle_since = std::chrono::steady_clock::now();
  TurnResult r;
  r.session = session;
  r.tokens.assign(seq.output().begin() + seq.turn_begin(), seq.output().end());
  r.logprobs.assign(seq.logprobs().begin() + seq.turn_begin(), seq.logprobs().end());
  r.finish_reason = seq.finish_reason();
  r.policy_version = policy_version_;
  // The rows computed for the turn, less the decode rows of its own sampled tokens (all but the first).
  r.prefilled_tokens = seq.kv_rows - s.kv_rows_before - (static_cast<int64_t>(r.tokens.size()) - 1);
  r.recomputed_tokens = seq.kv_rows_recomputed - s.recomputed_before;
  return r;
}

std::vector<TurnResult> Engine::run_turns(const std::vector<TurnRequest>& turns, const StepObserver& observer,
                                          RolloutStats* stats_out) {
  Stopwatch clock;
  std::vector<Sequence*> in_call;
  for (const TurnRequest& t : turns) {
    Sequence* seq = find_session(t.session, "a turn").sequence.get();
    for (const Sequence* other : in_call)
      RLCPP_CHECK(other != seq, "engine: session " << t.session << " is given two turns in one call");
    in_call.push_back(seq);
  }
  blocks_.reset_peak();
  Scheduler scheduler = new_scheduler();
  for (const TurnRequest& t : turns) begin_turn(t);
  // Fresh sessions next to each other with the same prompt and id share its prefill (a group's first turn).
  const auto fresh = [](const Sequence& q) { return q.num_output() == 0 && q.block_table.empty(); };
  for (size_t i = 0; i < turns.size();) {
    Sequence& lead = *in_call[i];
    size_t end = i + 1;
    if (fresh(lead))
      while (end < turns.size() && fresh(*in_call[end]) && in_call[end]->prompt_id() == lead.prompt_id() &&
             in_call[end]->prompt() == lead.prompt())
        ++end;
    if (fresh(lead)) {
      scheduler.add_group(std::vector<Sequence*>(in_call.begin() + static_cast<std::ptrdiff_t>(i),
                                                 in_call.begin() + static_cast<std::ptrdiff_t>(end)));
    } else {
      scheduler.add_continuation(&lead);
    }
    i = end;
  }
  RolloutStats stats;
  stats.sequences = static_cast<int64_t>(turns.size());
  stats.kv_bytes_per_token = kv_bytes_per_token();
  stats.block_size = cache_.block_size;
  stats.num_blocks = cache_.num_blocks;
  drive(scheduler, stats, observer, clock);
  stats.peak_blocks_in_use = blocks_.peak_used();
  stats.wall_s = clock.seconds();
  if (stats_out) *stats_out = stats;

  std::vector<TurnResult> results;
  for (const TurnRequest& t : turns) results.push_back(end_turn(t.session));
  return results;
}

void Engine::close_session(int64_t session) {
  Session& s = find_session(session, "close");
  Sequence& seq = *s.sequence;
  RLCPP_CHECK(seq.status() != SequenceStatus::kRunning, "engine: close of session " << session << " while it runs");
  std::erase(parked_, &seq);
  if (!seq.block_table.empty()) blocks_.release(seq);
  sessions_.erase(session);
}

std::vector<int64_t> Engine::close_idle_sessions(double max_idle_s) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<int64_t> closed;
  for (const auto& [id, s] : sessions_)
    if (std::chrono::duration<double>(now - s->idle_since).count() >= max_idle_s) closed.push_back(id);
  for (int64_t id : closed) close_session(id);
  return closed;
}

SessionView Engine::session(int64_t session) const {
  const auto it = sessions_.find(session);
  RLCPP_CHECK(it != sessions_.end(), "engine: session " << session << " is not open");
  const Session& s = *it->second;
  return {*s.sequence, s.sequence->block_table.empty() ? -1 : s.kv_version,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s.idle_since).count()};
}

}  // namespace rlcpp
