#include "loop/harness_rollout.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "agent/episode_runner.h"
#include "core/error.h"
#include "loop/harness_process.h"
#include "rollout/serve_http.h"
#include "rollout/serve_loop.h"
#include "rollout/serve_sessions.h"

namespace rlcpp {

namespace {

constexpr const char* kModelName = "policy";

std::string session_name(const Episode& e) {
  return "s" + std::to_string(e.first_step) + "-i" + std::to_string(e.group) + "-e" + std::to_string(e.sample_index);
}

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

// The harness's stdout: one {"session", "reward", ...} per line, by session.
std::map<std::string, Json> read_rewards(const std::string& text, const std::set<std::string>& sessions) {
  std::map<std::string, Json> out;
  std::istringstream lines(text);
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "agent.harness: stdout line " + std::to_string(n) + " (\"" + line.substr(0, 120) + "\")";
    Json j;
    try {
      j = Json::parse(line);
    } catch (const std::exception&) {
      RLCPP_FAIL(where << " is not JSON: each line is {\"session\": ..., \"reward\": ...} (logs go to stderr)");
    }
    RLCPP_CHECK(j.is_object() && j.contains("session") && j["session"].is_string(),
                where << " needs \"session\" as a string");
    const std::string key = j["session"].get<std::string>();
    RLCPP_CHECK(sessions.count(key), where << ": session \"" << key << "\" is not one of this draw's");
    RLCPP_CHECK(!out.count(key), where << ": session \"" << key << "\" has a reward already");
    RLCPP_CHECK(j.contains("reward") && j["reward"].is_number(), where << " needs \"reward\" as a number");
    RLCPP_CHECK(!j.contains("success") || j["success"].is_boolean(), where << ": \"success\" must be true or false");
    for (const char* count : {"tool_calls", "tool_errors"})
      RLCPP_CHECK(!j.contains(count) || (j[count].is_number_integer() && j[count].get<int64_t>() >= 0),
                  where << ": \"" << count << "\" must be a count (an integer >= 0)");
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

}  // namespace

HarnessDraw play_with_harness(std::vector<Episode>& episodes, Engine& engine, const Tokenizer& tokenizer,
                              const TurnProtocol& protocol, const TrainConfig& config, const SamplingParams& sampling) {
  const AgentConfig& agent = config.agent;
  SamplingParams turn = sampling;
  turn.max_new_tokens = agent.max_turn_tokens;
  ServeSessions book(tokenizer, turn, harness_chat_tail(protocol));
  std::set<std::string> keys;
  std::string input;
  for (const Episode& e : episodes) {
    const std::string key = session_name(e);
    book.add(key, e.problem.id, e.sample_index);
    keys.insert(key);
    const Json item{{"session", key},          {"item", e.group},         {"episode", e.sample_index},
                    {"group_size", config.rollout.group_size}, {"prompt", e.problem.prompt},
                    {"answer", e.problem.answer}, {"meta", e.problem.meta}, {"step", e.first_step}};
    input += item.dump() + "\n";
  }

  const int64_t context = engine.model_config().max_position_embeddings;
  HarnessDraw out;
  HarnessExit exit;
  {
    ServeLoop loop(engine, tokenizer, &book);
    ServeOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.model_name = kModelName;
    options.limits.max_concurrency = std::max<int64_t>(64, static_cast<int64_t>(episodes.size()));
    options.limits.max_tokens = std::max<int64_t>(options.limits.max_tokens, agent.max_turn_tokens);
    ServeHttp http(loop, tokenizer, options, context, engine.model_config().vocab_size, &book);
    http.bind();
    std::thread listener([&] { http.listen(); });
    const std::string url = "http://127.0.0.1:" + std::to_string(http.port()) + "/v1";
    const char* key = std::getenv("OPENAI_API_KEY");
    try {
      exit = run_harness_command(agent.harness,
                                 {{"OPENAI_BASE_URL", url},
                                  {"RLCPP_BASE_URL", url},
                                  {"OPENAI_API_KEY", key && *key ? key : "rlcpp"},
                                  {"RLCPP_MODEL", kModelName},
                                  {"RLCPP_SESSION_HEADER", kSessionHeader},
                                  {"RLCPP_STEP", std::to_string(episodes.empty() ? 0 : episodes.front().first_step)}},
                                 input, agent.harness_timeout_s);
    } catch (...) {
      http.stop();
      listener.join();
      throw;
    }
    http.stop();
    listener.join();
    const ServeLoopFigures f = loop.figures();
    out.stats = f.stats;
    out.wall_s = exit.wall_s;
    out.env_s = std::max(0.0, exit.wall_s - f.busy_s);
    out.requests = f.jobs_done;
  }  // the loop has stopped: the engine is this thread's again

  const std::map<std::string, SessionRecord> records = book.records();
  const std::map<std::string, int64_t> opened = book.engine_sessions();
  // The records are the engine's sequences, token for token: what the trainer reads is what the model read.
  for (const auto& [key, id] : opened) {
    const SessionRecord& rec = records.at(key);
    if (rec.failure.empty()) {
      const Sequence& seq = engine.session(id).sequence;
      RLCPP_CHECK(seq.prompt() == rec.prompt && seq.output() == rec.tokens,
                  "harness: session \"" << key << "\"'s record differs from the engine's sequence");
    }
    engine.close_session(id);
  }
  RLCPP_CHECK(exit.ok, "agent.harness (\"" << agent.harness << "\") " << exit.how
                                           << " at step " << (episodes.empty() ? 0 : episodes.front().first_step)
                                           << "; its stderr is above");
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

}  // namespace rlcpp
