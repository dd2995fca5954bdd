#include "agent/episode_runner.h"

#include <algorithm>
#include <map>
#include <thread>

#include "agent/remote_env.h"
#include "core/error.h"
#include "core/metrics.h"

namespace rlcpp {

namespace {

// One running episode of a call.
struct Running {
  Episode* episode;
  int64_t session = -1;
  int64_t turns_here = 0;  // turns taken in this call
  TurnReply reply;         // this round's turn
  EnvStep step;
  std::string failure;     // the environment's call failed this round
  bool timed_out = false;
};

void end(Episode& e, const std::string& reason, bool done) {
  e.done = done;
  e.truncated = !done;
  e.end_reason = reason;
}

// Runs `fn` on each of `items`, on up to `threads` threads (static chunks; the order of results is the items').
template <class T, class F> void for_each_parallel(std::vector<T*>& items, int64_t threads, F&& fn) {
  const size_t n = items.size();
  const size_t workers = static_cast<size_t>(std::clamp<int64_t>(threads, 1, static_cast<int64_t>(std::max<size_t>(n, 1))));
  if (workers <= 1) {
    for (T* item : items) fn(*item);
    return;
  }
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (size_t i = w; i < n; i += workers) fn(*items[i]);
    });
  for (std::thread& t : pool) t.join();
}

// Calls the environment, timing it into the episode; a failure (an exception, or an in-process call past the
// deadline) is recorded, not thrown.
template <class F> void call_env(Running& r, double timeout_s, F&& fn) {
  Stopwatch watch;
  try {
    fn();
  } catch (const EnvCallError& e) {
    r.failure = e.what();
    r.timed_out = e.timeout();
  } catch (const std::exception& e) {
    r.failure = std::string("the environment failed: ") + e.what();
  }
  const double seconds = watch.seconds();
  r.episode->env_seconds += seconds;
  if (r.failure.empty() && seconds > timeout_s) {
    r.failure = "the environment's call took " + std::to_string(seconds) + " s, past agent.call_timeout_s";
    r.timed_out = true;
  }
}

}  // namespace

std::string episode_key(const Episode& e) {
  return std::to_string(e.first_step) + "-" + std::to_string(e.group) + "-" + std::to_string(e.sample_index) + "-" +
         std::to_string(e.problem.id);
}

RunnerTotals run_episodes(const std::vector<Episode*>& episodes, TurnEngine& engine, const EnvFactory& make_env,
                          const TurnProtocol& protocol, const AgentConfig& config, int64_t env_threads) {
  RunnerTotals totals;
  const int64_t limit = config.max_tokens > 0 ? std::min(config.max_tokens, engine.context()) : engine.context();
  const std::vector<int64_t> stops = protocol.stop_tokens();
  std::vector<Running> all;
  for (Episode* e : episodes)
    if (!e->finished()) all.push_back({e});

  // Fresh episodes begin: their environment resets and the prompt is written.
  std::vector<Running*> fresh;
  for (Running& r : all)
    if (r.episode->prompt.empty()) fresh.push_back(&r);
  Stopwatch env_watch;
  for_each_parallel(fresh, env_threads, [&](Running& r) {
    call_env(r, config.call_timeout_s, [&] {
      r.episode->env = make_env(*r.episode);
      r.episode->prompt_text = r.episode->env->reset(r.episode->problem);
      r.episode->tools = r.episode->env->tools();
      r.episode->prompt = protocol.prompt_tokens(r.episode->prompt_text, r.episode->tools);
    });
    if (r.failure.empty() && r.episode->length() >= limit) r.failure = "the prompt fills the episode's token limit";
  });
  totals.env_seconds += env_watch.seconds();

  // Sessions, in the order given (a group's fresh episodes side by side share their prompt's prefill).
  std::vector<Running*> active;
  for (Running& r : all) {
    Episode& e = *r.episode;
    if (!r.failure.empty()) {
      e.failure = r.failure;
      end(e, r.timed_out ? "env_timeout" : "env_error", false);
      continue;
    }
    RLCPP_CHECK(e.env != nullptr, "agent: episode " << episode_key(e) << " has no environment (a resumed episode "
                                                    << "must be replayed first)");
    r.session = engine.open(e.prompt, e.problem.id, e.sample_index);
    if (!e.tokens.empty()) engine.append(r.session, e.tokens);  // carried over: its history, computed again
    active.push_back(&r);
  }

  while (!active.empty()) {
    ++totals.rounds;
    std::vector<TurnAsk> asks;
    for (Running* r : active)
      asks.push_back({r->session, std::min(config.max_turn_tokens, limit - r->episode->length()), r->episode->seed});
    Stopwatch engine_watch;
    std::vector<TurnReply> replies = engine.run_turns(asks, stops);
    totals.engine_seconds += engine_watch.seconds();
    RLCPP_CHECK(replies.size() == asks.size(), "agent: the engine answered " << replies.size() << " of " << asks.size()
                                                                             << " turns");
    for (size_t i = 0; i < active.size(); ++i) {
      Running& r = *active[i];
      r.reply = std::move(replies[i]);
      r.failure.clear();
      r.timed_out = false;
      Episode& e = *r.episode;
      e.add_model_tokens(r.reply.tokens, r.reply.logprobs, r.reply.policy_version, r.reply.ended);
      e.prefilled_tokens += r.reply.prefilled_tokens;
      e.recomputed_tokens += r.reply.recomputed_tokens;
      ++r.turns_here;
    }
    env_watch.reset();
    for_each_parallel(active, env_threads, [&](Running& r) {
      call_env(r, config.call_timeout_s, [&] {
        const AssistantTurn turn = protocol.parse(r.reply.tokens, r.reply.ended, r.episode->tools);
        r.step = r.episode->env->step(turn);
      });
    });
    totals.env_seconds += env_watch.seconds();

    std::vector<Running*> next;
    for (Running* rp : active) {
      Running& r = *rp;
      Episode& e = *r.episode;
      bool running = false;
      if (!r.failure.empty()) {
        e.failure = r.failure;
        end(e, r.timed_out ? "env_timeout" : "env_error", false);
      } else {
        e.reward += r.step.reward;
        e.tool_calls += r.step.tool_calls;
        e.tool_errors += r.step.tool_errors;
        if (r.step.success) e.success = r.step.success;
        if (r.step.done) {
          end(e, "done", true);
        } else if (e.turns() >= config.max_turns) {
          end(e, "max_turns", false);
        } else {
          const std::vector<int32_t> obs = protocol.observation_tokens(r.reply.tokens, r.step);
          if (e.length() + static_cast<int64_t>(obs.size()) + 1 > limit) {
            end(e, e.length() + static_cast<int64_t>(obs.size()) + 1 > engine.context() ? "context" : "max_tokens",
                false);
          } else {
            e.add_environment_tokens(obs, r.step.observation, r.step.tool_output);
            engine.append(r.session, obs);
            running = config.turns_per_draw == 0 || r.turns_here < config.turns_per_draw;
          }
        }
      }
      if (running) {
        next.push_back(&r);
      } else {
        engine.close(r.session);  // finished, or carried into the next draw (its K/V would be stale there)
        if (e.finished()) e.env.reset();
      }
    }
    active.swap(next);
  }
  return totals;
}

void replay_episode(Episode& e, const EnvFactory& make_env, const TurnProtocol& protocol) {
  const std::string where = "resume: episode " + episode_key(e);
  e.env = make_env(e);
  const std::string text = e.env->reset(e.problem);
  e.tools = e.env->tools();
  RLCPP_CHECK(text == e.prompt_text && protocol.prompt_tokens(text, e.tools) == e.prompt,
              where << ": its environment's first observation does not give the prompt it was saved with (the "
                       "environment must replay the same to be resumed)");
  for (size_t k = 0; k < e.turn_spans.size(); ++k) {
    const auto [begin, end_at] = e.turn_spans[k];
    const std::vector<int32_t> turn(e.tokens.begin() + begin, e.tokens.begin() + end_at);
    const EnvStep step = e.env->step(protocol.parse(turn, e.turn_ended[k] != 0, e.tools));
    const int64_t next = k + 1 < e.turn_spans.size() ? e.turn_spans[k + 1].first : static_cast<int64_t>(e.tokens.size());
    const std::vector<int32_t> saved(e.tokens.begin() + end_at, e.tokens.begin() + next);
    RLCPP_CHECK(!step.done && protocol.observation_tokens(turn, step) == saved,
                where << ": turn " << k + 1 << " replays to another observation than the one saved (the environment "
                                              "must replay the same to be resumed)");
  }
}

}  // namespace rlcpp
