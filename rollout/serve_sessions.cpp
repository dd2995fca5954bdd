#include "rollout/serve_sessions.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "core/error.h"
#include "rollout/serve_response.h"

namespace rlcpp {

namespace {

std::string quoted(const std::string& key) { return "session \"" + key + "\""; }

}  // namespace

ServeSessions::ServeSessions(const Tokenizer& tok, const SamplingParams& sampling, ChatTail chat_tail)
    : tok_(tok), sampling_(sampling), chat_tail_(std::move(chat_tail)) {}

void ServeSessions::add(const std::string& key, uint64_t prompt_id, int64_t sample_index, uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  RLCPP_CHECK(!key.empty() && entries_.count(key) == 0, "serve sessions: session \"" << key << "\" added twice or empty");
  Entry& e = entries_[key];
  e.prompt_id = prompt_id;
  e.sample_index = sample_index;
  e.seed = seed;
}

void ServeSessions::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  RLCPP_CHECK(!find(key).busy, "serve sessions: " << quoted(key) << " removed while a request of it runs");
  entries_.erase(key);
}

void ServeSessions::set_draw_budget(int64_t turns, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  turn_budget_ = turns;
  token_budget_ = tokens;
}

void ServeSessions::set_max_turns(int64_t turns) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_turns_ = turns;
}

void ServeSessions::new_draw() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, e] : entries_) {
    e.turns_this_draw = 0;
    e.tokens_this_draw = 0;
    e.held = false;  // a held turn is busy until the loop starts it (or holds it again)
  }
}

bool ServeSessions::start_turn(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = find(key);
  e.held = (turn_budget_ > 0 && e.turns_this_draw >= turn_budget_) ||
           (token_budget_ > 0 && e.tokens_this_draw >= token_budget_);
  if (!e.held) ++e.turns_this_draw;
  return !e.held;
}

int64_t ServeSessions::tokens_left(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return token_budget_ > 0 ? token_budget_ - find(key).tokens_this_draw : std::numeric_limits<int64_t>::max();
}

ServeSessions::State ServeSessions::state(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Entry& e = find(key);
  return {e.busy, e.held, !e.record.failure.empty()};
}

ServeSessions::Entry& ServeSessions::find(const std::string& key) {
  const auto it = entries_.find(key);
  RLCPP_CHECK(it != entries_.end(), "serve sessions: " << quoted(key) << " is not known");
  return it->second;
}

const ServeSessions::Entry& ServeSessions::find(const std::string& key) const {
  return const_cast<ServeSessions*>(this)->find(key);
}

std::vector<int32_t> ServeSessions::continuation(const Entry& e, const CompletionRequest& r) const {
  const SessionRecord& rec = e.record;
  if (e.kind == Entry::Kind::kChat) {
    if (!r.chat)
      throw ServeError(400, kSessionHeader, "this session began as a chat: continue it on /v1/chat/completions");
    const Json& before = e.messages;
    const Json& now = r.messages;
    if (now.size() < before.size() + 2)
      throw ServeError(400, "messages", "a session's next request repeats its " + std::to_string(before.size()) +
                                            " messages, then the assistant's reply, then new messages; got " +
                                            std::to_string(now.size()) + " messages");
    for (size_t i = 0; i < before.size(); ++i)
      if (now[i] != before[i])
        throw ServeError(400, "messages", "message " + std::to_string(i) + " differs from the session's (its history "
                                          "is what the model read: it cannot be rewritten)");
    const Json& reply = now[before.size()];
    if (!reply.is_object() || reply.value("role", "") != "assistant")
      throw ServeError(400, "messages", "message " + std::to_string(before.size()) +
                                            " must be the assistant's reply (role \"assistant\") to the last request");
    if (!chat_tail_) throw ServeError(400, "messages", "this run's turn protocol writes no chat turns");
    Json tail = Json::array();
    for (size_t i = before.size() + 1; i < now.size(); ++i) tail.push_back(now[i]);
    const auto& [begin, end] = rec.turn_spans.back();
    const std::vector<int32_t> last_turn(rec.tokens.begin() + begin, rec.tokens.begin() + end);
    return chat_tail_(tail, last_turn);
  }
  if (r.chat) throw ServeError(400, kSessionHeader, "this session began on /v1/completions: continue it there");
  const std::optional<std::string> text = completion_prompt_text(r.prompt_value);
  if (e.kind == Entry::Kind::kText) {
    if (!text) throw ServeError(400, "prompt", "this session began with a text prompt: continue it with text");
    const size_t n = std::min(text->size(), e.text.size());
    const size_t differs = static_cast<size_t>(std::mismatch(e.text.begin(), e.text.begin() + static_cast<std::ptrdiff_t>(n),
                                                             text->begin()).first - e.text.begin());
    if (differs < e.text.size())
      throw ServeError(400, "prompt", "does not continue the session's text (" + std::to_string(e.text.size()) +
                                          " characters: the first prompt, each response and each addition); it "
                                          "differs at character " + std::to_string(differs));
    try {
      return tok_.encode(text->substr(e.text.size()));
    } catch (const Error& err) {
      throw ServeError(400, "prompt", err.what());
    }
  }
  if (text) throw ServeError(400, "prompt", "this session began with token ids: continue it with token ids");
  std::vector<int32_t> held = rec.prompt;
  held.insert(held.end(), rec.tokens.begin(), rec.tokens.end());
  const size_t n = std::min(held.size(), r.prompt.size());
  const size_t differs =
      static_cast<size_t>(std::mismatch(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n), r.prompt.begin())
                              .first - held.begin());
  if (differs < held.size())
    throw ServeError(400, "prompt", "does not start with the session's " + std::to_string(held.size()) +
                                        " tokens; it differs at token " + std::to_string(differs));
  return std::vector<int32_t>(r.prompt.begin() + static_cast<std::ptrdiff_t>(held.size()), r.prompt.end());
}

SessionTurnPlan ServeSessions::plan(const std::string& key, CompletionRequest& r, int64_t context) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end())
    throw ServeError(400, kSessionHeader, quoted(key) + " is not one of the " + std::to_string(entries_.size()) +
                                              " sessions being played (an ended episode's takes no more requests)");
  Entry& e = it->second;
  if (!e.record.failure.empty())
    throw ServeError(400, kSessionHeader, quoted(key) + " failed earlier (" + e.record.failure +
                                              "); it takes no more requests");
  if (e.busy)
    throw ServeError(409, kSessionHeader, quoted(key) + " has a request running: its requests come one at a time");
  if (max_turns_ > 0 && static_cast<int64_t>(e.record.turn_spans.size()) >= max_turns_)
    throw ServeError(400, kSessionHeader, quoted(key) + " has had its " + std::to_string(max_turns_) +
                                              " turns (agent.max_turns): its episode is over, write its reward");
  if (r.n != 1) throw ServeError(400, "n", "a session samples one choice (n = 1), got " + std::to_string(r.n));
  if (!r.stop.empty())
    throw ServeError(400, "stop", "a session's turn ends at EOS or the run's stop tokens; stop strings are not taken");

  if (r.top_logprobs > 0)
    throw ServeError(400, r.chat ? "top_logprobs" : "logprobs",
                     "a session's turn returns its sampled tokens' log-probs, not alternatives");

  SessionTurnPlan p;
  p.key = key;
  p.spec.prompt_id = e.prompt_id;
  p.spec.sample_index = e.sample_index;
  std::vector<int32_t> whole;
  if (!e.record.opened()) {
    const std::optional<std::string> text = r.chat ? std::nullopt : completion_prompt_text(r.prompt_value);
    e.kind = r.chat ? Entry::Kind::kChat : text ? Entry::Kind::kText : Entry::Kind::kIds;
    if (e.kind == Entry::Kind::kText) {  // not encoded by the parse (a session's text is encoded a part at a time)
      try {
        r.prompt = tok_.encode_prompt(*text, Json());
      } catch (const Error& err) {
        throw ServeError(400, "prompt", err.what());
      }
      if (r.prompt.empty()) throw ServeError(400, "prompt", "encodes to no tokens");
    }
    p.spec.prompt = r.prompt;
    whole = r.prompt;
    e.pending_messages = r.messages;
    e.pending_text = text.value_or("");
  } else {
    p.append = continuation(e, r);
    e.pending_messages = r.messages;
    e.pending_text = e.kind == Entry::Kind::kText ? completion_prompt_text(r.prompt_value)->substr(e.text.size()) : "";
    whole = e.record.prompt;
    whole.insert(whole.end(), e.record.tokens.begin(), e.record.tokens.end());
    whole.insert(whole.end(), p.append.begin(), p.append.end());
  }
  if (static_cast<int64_t>(whole.size()) >= context)
    throw ServeError(400, r.chat ? "messages" : "prompt",
                     quoted(key) + " would hold " + std::to_string(whole.size()) + " tokens; the served context of " +
                         std::to_string(context) + " leaves no room for a new token");
  SamplingParams s = sampling_;
  s.seed = e.seed;
  s.max_new_tokens = std::min({r.sampling.max_new_tokens, sampling_.max_new_tokens,
                               context - static_cast<int64_t>(whole.size())});
  r.sampling = s;
  r.seeded = true;
  r.prompt = std::move(whole);
  e.busy = true;
  return p;
}

int64_t ServeSessions::engine_session(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return find(key).engine_session;
}

void ServeSessions::forget_engine_sessions() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, e] : entries_) e.engine_session = -1;
}

void ServeSessions::opened(const std::string& key, int64_t engine_session) {
  std::lock_guard<std::mutex> lock(mutex_);
  find(key).engine_session = engine_session;
}

void ServeSessions::turn_done(const SessionTurnPlan& plan, const TurnResult& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  record_part(plan, result, /*last=*/true);
}

void ServeSessions::turn_kept(const SessionTurnPlan& plan, const TurnResult& part) {
  std::lock_guard<std::mutex> lock(mutex_);
  record_part(plan, part, /*last=*/false);
}

void ServeSessions::record_part(const SessionTurnPlan& plan, const TurnResult& t, bool last) {
  Entry& e = find(plan.key);
  SessionRecord& rec = e.record;
  if (!rec.opened()) rec.prompt = plan.spec.prompt;
  if (e.open_turn < 0) {  // the turn's first part: the request's additions come first
    for (int32_t id : plan.append) {
      rec.tokens.push_back(id);
      rec.sampled.push_back(0);
      rec.logprobs.push_back(0.0f);
      rec.versions.push_back(-1);
    }
    e.open_turn = static_cast<int64_t>(rec.tokens.size());
  }
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    rec.tokens.push_back(t.tokens[i]);
    rec.sampled.push_back(1);
    rec.logprobs.push_back(t.logprobs[i]);
    rec.versions.push_back(t.policy_version);
  }
  rec.prefilled_tokens += t.prefilled_tokens;
  rec.recomputed_tokens += t.recomputed_tokens;
  e.tokens_this_draw += static_cast<int64_t>(t.tokens.size());
  if (!last) {
    e.held = true;  // busy still: its request is open
    return;
  }
  const auto begin = e.open_turn, end = static_cast<int64_t>(rec.tokens.size());
  rec.turn_spans.emplace_back(begin, end);
  rec.turn_ended.push_back(t.finish_reason != FinishReason::kLength ? 1 : 0);
  e.messages = std::move(e.pending_messages);
  e.text += e.pending_text + response_text(tok_, std::vector<int32_t>(rec.tokens.begin() + begin, rec.tokens.end()));
  e.open_turn = -1;
  e.busy = false;
  e.held = false;
}

void ServeSessions::turn_failed(const std::string& key, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = find(key);
  if (e.record.failure.empty()) e.record.failure = why;
  e.open_turn = -1;
  e.busy = false;
  e.held = false;
}

std::map<std::string, SessionRecord> ServeSessions::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, SessionRecord> out;
  for (const auto& [key, e] : entries_) out[key] = e.record;
  return out;
}

SessionRecord ServeSessions::record(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return find(key).record;
}

std::map<std::string, int64_t> ServeSessions::engine_sessions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, int64_t> out;
  for (const auto& [key, e] : entries_)
    if (e.engine_session >= 0) out[key] = e.engine_session;
  return out;
}

}  // namespace rlcpp
