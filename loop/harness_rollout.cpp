#include "loop/harness_rollout.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "agent/episode_runner.h"
#include "core/error.h"
#include "loop/harness_process.h"
#include "loop/session_turn_loop.h"
#include "rollout/serve_http.h"
#include "rollout/serve_sessions.h"

namespace rlcpp {

namespace {

constexpr const char* kModelName = "policy";

std::string session_name(const Episode& e) {
  return "s" + std::to_string(e.first_step) + "-i" + std::to_string(e.group) + "-e" + std::to_string(e.sample_index);
}

// An episode as the harness reads it on its stdin.
std::string item_line(const Episode& e, const TrainConfig& config) {
  const Json item{{"session", session_name(e)},  {"item", e.group},         {"episode", e.sample_index},
                  {"group_size", config.rollout.group_size}, {"prompt", e.problem.prompt},
                  {"answer", e.problem.answer}, {"meta", e.problem.meta}, {"step", e.first_step}};
  return item.dump() + "\n";
}

// rlcpp serve's HTTP front on a loopback port (any free one), its requests `book`'s sessions' turns, run by a
// SessionTurnLoop on the engine each draw gives it.
struct HarnessServer {
  HarnessServer(const Tokenizer& tokenizer, ServeSessions& book, int64_t sessions_at_once, int64_t max_turn_tokens,
                int64_t context, int64_t vocab_size)
      : loop(book), http(loop, tokenizer, options(sessions_at_once, max_turn_tokens), context, vocab_size, &book) {
    http.bind();
    listener = std::thread([this] { http.listen(); });
  }
  ~HarnessServer() {
    http.stop();
    listener.join();
  }
  static ServeOptions options(int64_t sessions_at_once, int64_t max_turn_tokens) {
    ServeOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.model_name = kModelName;
    o.limits.max_concurrency = std::min(ServeLimits::kMaxConcurrency, std::max<int64_t>(64, sessions_at_once));
    o.limits.max_tokens = std::max<int64_t>(o.limits.max_tokens, max_turn_tokens);
    // A harness's client keeps connections between its requests (the openai package: up to 100 idle ones, 5 s);
    // the server keeps them longer, so it never drops one as the client reuses it.
    o.keep_alive_s = 60;
    o.idle_connections = 256;
    return o;
  }
  // The harness's environment: where the server is, the model's name, the session header.
  std::vector<std::pair<std::string, std::string>> harness_environment(int64_t step) const {
    const std::string url = "http://127.0.0.1:" + std::to_string(http.port()) + "/v1";
    const char* key = std::getenv("OPENAI_API_KEY");
    return {{"OPENAI_BASE_URL", url},
            {"RLCPP_BASE_URL", url},
            {"OPENAI_API_KEY", key && *key ? key : "rlcpp"},
            {"RLCPP_MODEL", kModelName},
            {"RLCPP_SESSION_HEADER", kSessionHeader},
            {"RLCPP_STEP", std::to_string(step)}};
  }

  SessionTurnLoop loop;
  ServeHttp http;
  std::thread listener;
};

}  // namespace

ServeSessions::ChatTail harness_chat_tail(const TurnProtocol& protocol) {
  if (protocol.name() != "chat") return nullptr;
  return [&protocol](const Json& tail, const std::vector<int32_t>& last_turn) {
    std::string roles;
    bool all_tool = true;
    for (const Json& m : tail) {
      const std::string role = m.is_object() ? m.value("role", "") : "";
      roles += (roles.empty() ? "" : ", ") + ("\"" + role + "\"");
      all_tool = all_tool && role == "tool";
      if (!m.is_object() || !m.contains("content") || !m["content"].is_string())
        throw ServeError(400, "messages", "a session's new messages need \"content\" as a string");
    }
    EnvStep step;
    if (all_tool) {
      step.tool_output = true;
      for (size_t i = 0; i < tail.size(); ++i)
        step.observation += (i > 0 ? "\n</tool_response>\n<tool_response>\n" : "") + tail[i]["content"].get<std::string>();
    } else if (tail.size() == 1 && tail[0]["role"] == "user") {
      step.observation = tail[0]["content"].get<std::string>();
    } else {
      throw ServeError(400, "messages", "a session's new messages are tool replies (role \"tool\") or one user "
                                        "message; got roles [" + roles + "]");
    }
    return protocol.observation_tokens(last_turn, step);
  };
}

namespace {

std::string line_place(const std::string& line, int64_t n) {
  return "agent.harness: stdout line " + std::to_string(n) + " (\"" + line.substr(0, 120) + "\")";
}

// One line of the harness's stdout, {"session", "reward", ...}, checked (whether its session is one being played is
// the caller's to check); null for a blank line. `n` counts its lines from 1.
Json read_reward_line(const std::string& line, int64_t n) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return nullptr;
  const std::string where = line_place(line, n);
  Json j;
  try {
    j = Json::parse(line);
  } catch (const std::exception&) {
    RLCPP_FAIL(where << " is not JSON: each line is {\"session\": ..., \"reward\": ...} (logs go to stderr)");
  }
  RLCPP_CHECK(j.is_object() && j.contains("session") && j["session"].is_string(),
              where << " needs \"session\" as a string");
  RLCPP_CHECK(j.contains("reward") && j["reward"].is_number(), where << " needs \"reward\" as a number");
  RLCPP_CHECK(!j.contains("success") || j["success"].is_boolean(), where << ": \"success\" must be true or false");
  for (const char* count : {"tool_calls", "tool_errors"})
    RLCPP_CHECK(!j.contains(count) || (j[count].is_number_integer() && j[count].get<int64_t>() >= 0),
                where << ": \"" << count << "\" must be a count (an integer >= 0)");
  return j;
}

// The harness's stdout: one {"session", "reward", ...} per line, by session.
std::map<std::string, Json> read_rewards(const std::string& text, const std::set<std::string>& sessions) {
  std::map<std::string, Json> out;
  std::istringstream lines(text);
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    const Json j = read_reward_line(line, n);
    if (j.is_null()) continue;
    const std::string key = j["session"].get<std::string>();
    RLCPP_CHECK(sessions.count(key), line_place(line, n) << ": session \"" << key << "\" is not one of this draw's");
    RLCPP_CHECK(!out.count(key), line_place(line, n) << ": session \"" << key << "\" has a reward already");
    out[key] = j;
  }
  return out;
}

// An episode as its session's record and the harness's line made it.
void fill_episode(Episode& e, const SessionRecord& rec, const Json* line) {
  e.prompt = rec.prompt;
  e.tokens = rec.tokens;
  e.logprobs = rec.logprobs;
  e.versions = rec.versions;
  e.sources.clear();
  for (uint8_t sampled : rec.sampled) {
    e.sources.push_back(sampled ? TokenSource::kModel : TokenSource::kEnvironment);
    e.env_tokens += sampled ? 0 : 1;
  }
  e.turn_spans = rec.turn_spans;
  e.turn_ended = rec.turn_ended;
  e.prefilled_tokens = rec.prefilled_tokens;
  e.recomputed_tokens = rec.recomputed_tokens;
  if (line) {
    e.reward = (*line)["reward"].get<double>();
    if (line->contains("success")) e.success = (*line)["success"].get<bool>();
    e.tool_calls = line->value("tool_calls", int64_t{0});
    e.tool_errors = line->value("tool_errors", int64_t{0});
  }
  if (!rec.failure.empty() || !line) {
    e.truncated = true;
    e.end_reason = "env_error";
    e.failure = !rec.failure.empty() ? rec.failure : "the harness wrote no reward for it";
  } else {
    e.done = true;
    e.end_reason = "done";
  }
}

// A session's turns sample with the run's parameters, at most agent.max_turn_tokens a turn.
SamplingParams session_sampling(SamplingParams sampling, const AgentConfig& agent) {
  sampling.max_new_tokens = agent.max_turn_tokens;
  return sampling;
}

}  // namespace

HarnessDraw play_with_harness(std::vector<Episode>& episodes, RolloutTurnEngine& engine, const Tokenizer& tokenizer,
                              const TurnProtocol& protocol, const TrainConfig& config, const SamplingParams& sampling,
                              int64_t vocab_size) {
  const AgentConfig& agent = config.agent;
  ServeSessions book(tokenizer, session_sampling(sampling, agent), harness_chat_tail(protocol));
  book.set_max_turns(agent.max_turns);
  std::set<std::string> keys;
  std::string input;
  for (const Episode& e : episodes) {
    book.add(session_name(e), e.problem.id, e.sample_index, sampling.seed);
    keys.insert(session_name(e));
    input += item_line(e, config);
  }
  const int64_t step = episodes.empty() ? 0 : episodes.front().first_step;

  HarnessDraw out;
  HarnessExit exit;
  {
    HarnessServer server(tokenizer, book, static_cast<int64_t>(episodes.size()), agent.max_turn_tokens,
                         engine.context(), vocab_size);
    server.loop.begin_draw(engine);
    exit = run_harness_command(agent.harness, server.harness_environment(step), input, agent.harness_timeout_s);
    server.loop.end_draw();
    const ServeLoopFigures f = server.loop.figures();
    out.stats = f.stats;
    out.wall_s = exit.wall_s;
    out.env_s = std::max(0.0, exit.wall_s - f.busy_s);
    out.requests = f.jobs_done;
  }
  RLCPP_CHECK(exit.ok, "agent.harness (\"" << agent.harness << "\") " << exit.how << " at step " << step
                                           << "; its stderr is above");
  const std::map<std::string, SessionRecord> records = book.records();
  const std::map<std::string, Json> rewards = read_rewards(exit.stdout_text, keys);

  // Episodes into groups; a group with an episode never played (no turn recorded) is left out of the step.
  std::vector<Episode> kept;
  for (size_t begin = 0; begin < episodes.size();) {
    size_t end = begin + 1;
    while (end < episodes.size() && episodes[end].group == episodes[begin].group) ++end;
    bool played = true;
    for (size_t i = begin; i < end; ++i) played = played && records.at(session_name(episodes[i])).opened();
    if (!played) {
      ++out.dropped_groups;
    } else {
      for (size_t i = begin; i < end; ++i) {
        Episode& e = episodes[i];
        const auto line = rewards.find(session_name(e));
        fill_episode(e, records.at(session_name(e)), line == rewards.end() ? nullptr : &line->second);
        kept.push_back(std::move(e));
      }
    }
    begin = end;
  }
  if (out.dropped_groups > 0)
    std::fprintf(stderr, "agent.harness: %lld of %lld task items left out of the step: an episode of each was never "
                         "played (no request with its X-Session-Id)\n",
                 static_cast<long long>(out.dropped_groups),
                 static_cast<long long>(out.dropped_groups + static_cast<int64_t>(kept.size()) /
                                                                 std::max<int64_t>(1, config.rollout.group_size)));
  episodes = std::move(kept);
  return out;
}

// The run's harness (started at its first draw), its server and the sessions' book.
struct HarnessRun::Parts {
  Parts(const Tokenizer& tokenizer, const TurnProtocol& protocol, const TrainConfig& config,
        const SamplingParams& sampling, int64_t context, int64_t vocab_size)
      : book(tokenizer, session_sampling(sampling, config.agent), harness_chat_tail(protocol)),
        server(tokenizer, book, config.harness_sessions_at_once(), config.agent.max_turn_tokens, context, vocab_size) {
    book.set_max_turns(config.agent.max_turns);
  }
  ServeSessions book;
  HarnessServer server;
  std::unique_ptr<HarnessChild> child;
};

HarnessRun::HarnessRun(const Tokenizer& tokenizer, const TurnProtocol& protocol, const TrainConfig& config,
                       const SamplingParams& sampling, int64_t context, int64_t vocab_size)
    : parts_(std::make_unique<Parts>(tokenizer, protocol, config, sampling, context, vocab_size)), config_(config) {}

HarnessRun::~HarnessRun() {
  HarnessChild* child = parts_->child.get();
  if (!child) return;
  // Its input ends: a harness whose episodes have all ended exits (what it still writes is read and dropped).
  child->close_input();
  const Stopwatch clock;
  while (clock.seconds() < 10 && child->pump(0.1)) child->take_output();
  if (!child->finish(std::max(0.0, 10 - clock.seconds())))
    std::fprintf(stderr, "agent.harness (\"%s\"): still running 10 s after its input ended; killed\n",
                 config_.agent.harness.c_str());
  else if (!child->ok())
    std::fprintf(stderr, "agent.harness (\"%s\") %s at the run's end\n", config_.agent.harness.c_str(),
                 child->how().c_str());
}

HarnessDraw HarnessRun::play(std::vector<Episode>& episodes, RolloutTurnEngine& engine, bool to_the_end) {
  const AgentConfig& agent = config_.agent;
  ServeSessions& book = parts_->book;
  SessionTurnLoop& loop = parts_->server.loop;
  std::vector<Episode*> playing;
  std::string input;
  for (Episode& e : episodes) {
    if (e.finished()) continue;  // ended in an earlier draw: its group waits for the rest
    playing.push_back(&e);
    const std::string key = session_name(e);
    if (sent_.insert(key).second) {
      book.add(key, e.problem.id, e.sample_index, e.seed);
      input += item_line(e, config_);
    }
  }
  const int64_t step = playing.empty() ? 0 : playing.back()->first_step;
  if (!parts_->child)
    parts_->child = std::make_unique<HarnessChild>(agent.harness, parts_->server.harness_environment(step));
  HarnessChild& child = *parts_->child;
  child.send(input);
  book.set_draw_budget(to_the_end ? 0 : agent.turns_per_draw, to_the_end ? 0 : agent.tokens_per_draw);
  book.new_draw();
  const int64_t requests_before = loop.figures().jobs_done;
  const Stopwatch clock;
  loop.begin_draw(engine);

  const auto fail = [&](const std::string& why) {
    RLCPP_FAIL("agent.harness (\"" << agent.harness << "\") " << why << " at step " << step
                                   << " (its stderr is above)");
  };
  // Until each episode has its reward (no request of it running), has failed, or has a turn held for the next draw.
  // On an error the harness is killed at once and the draw ended (the run stops).
  try {
    while (true) {
      const bool open = child.pump(0.02);
      for (const std::string& line : child.take_lines()) {
        const Json j = read_reward_line(line, ++lines_read_);
        if (j.is_null()) continue;
        const std::string key = j["session"].get<std::string>();
        if (ended_.count(key)) continue;  // its episode ended without it (its session failed)
        RLCPP_CHECK(sent_.count(key), line_place(line, lines_read_)
                                          << ": session \"" << key << "\" is not one the harness was given");
        RLCPP_CHECK(!rewards_.count(key), line_place(line, lines_read_)
                                              << ": session \"" << key << "\" has a reward already");
        rewards_[key] = j;
      }
      bool settled = true;
      for (const Episode* e : playing) {
        const std::string key = session_name(*e);
        const ServeSessions::State st = book.state(key);
        settled = settled && (st.failed || st.held || (rewards_.count(key) && !st.busy));
      }
      if (settled) break;
      if (!open || child.exited()) {
        child.finish(1);
        fail(child.how() + " while " + std::to_string(playing.size()) + " episodes were being played");
      }
      if (clock.seconds() > agent.harness_timeout_s)
        fail("left the draw unended for agent.harness_timeout_s = " +
             std::to_string(static_cast<int64_t>(agent.harness_timeout_s)) + " s");
    }
  } catch (...) {
    parts_->child.reset();
    loop.end_draw();
    throw;
  }
  loop.end_draw();  // no turn runs: the engine's sessions closed, the weights may change before the next draw

  const ServeLoopFigures f = loop.figures();
  HarnessDraw out;
  out.stats = f.stats;
  out.wall_s = clock.seconds();
  out.env_s = std::max(0.0, out.wall_s - f.busy_s);
  out.requests = f.jobs_done - requests_before;
  for (Episode* e : playing) {
    const std::string key = session_name(*e);
    const ServeSessions::State st = book.state(key);
    if (st.held && !st.failed) continue;  // runs on in the next draw
    const auto line = rewards_.find(key);
    const SessionRecord rec = book.record(key);
    if (rec.opened()) {
      fill_episode(*e, rec, line == rewards_.end() ? nullptr : &line->second);
    } else {  // never requested: no tokens to train on
      e->truncated = true;
      e->end_reason = kUnplayed;
      e->failure = rec.failure.empty() ? "the harness wrote its reward without a request of it" : rec.failure;
    }
    book.remove(key);
    rewards_.erase(key);
    ended_.insert(key);
  }
  return out;
}

}  // namespace rlcpp
