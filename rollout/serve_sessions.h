// Sessions of `rlcpp serve` in an RL run's harness mode (agent.env "http", loop/harness_rollout.h): each episode an
// external agent harness plays is a session, named on every request by the X-Session-Id header, and kept as one of
// the engine's sessions (rollout/session.h) from turn to turn. The book knows the draw's sessions before the
// harness starts (their sampling key: prompt id and sample index), checks that each request continues its
// session's conversation, turns it into the only tokens the engine appends (the history is never re-rendered or
// re-tokenized: token in, token out), and records every token as the engine sampled or appended it, with its
// log-prob and policy version: what the trainer trains on.
//
// A request continues its session when it repeats what came before and adds to it:
//   chat         its messages are the last request's, then an assistant message (the session's last turn: the
//                tokens the model sampled are what it reads next, whatever the message says), then new messages
//                (tool replies, or one user message), which the run's turn protocol writes as tokens;
//   completions  a token-id prompt starts with the session's tokens; a text prompt starts with the session's text
//                so far (the first prompt's, then each response's and each addition's), the rest encoded alone.
// A session samples with the run's parameters (rollout.sampling: the trainer's log-probs are of the distribution
// sampled; a request's temperature, top-p, seed... do not apply), one choice, at most max_turn_tokens a request,
// no stop strings; a request that breaks these rules is a 400 naming the field, and the session stays as it was.
// Requests of one session come one at a time (a second while one runs is a 409).
//
// Episodes that span weight syncs (agent.turns_per_draw, agent.tokens_per_draw): the book gives each session at
// most so many turns, and sampled tokens, per draw (set_draw_budget). A request past the turns is held by the
// server's loop until the next draw (new_draw), which runs after the trainer's update and the weight sync: the turn
// then samples under the new version ("finish": a running turn ends under the version that began it). A turn that
// reaches the tokens is kept, its request open, and goes on in the next draw under the new version ("keep"). The
// session's record keeps each token's version.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "rollout/serve_request.h"
#include "rollout/session.h"
#include "tokenizer/tokenizer.h"

namespace rlcpp {

constexpr const char* kSessionHeader = "X-Session-Id";

// One session's tokens after its first request, as the engine holds them.
struct SessionRecord {
  std::vector<int32_t> prompt;     // the first request's
  std::vector<int32_t> tokens;     // every later token
  std::vector<uint8_t> sampled;    // per token: 1 sampled by the engine, 0 appended from a request
  std::vector<float> logprobs;     // per token (0 for an appended one)
  std::vector<int64_t> versions;   // per token: the policy version that sampled it (-1 for an appended one)
  std::vector<std::pair<int64_t, int64_t>> turn_spans;  // each request's sampled tokens, [begin, end) in tokens
  std::vector<uint8_t> turn_ended;  // per turn: 1 when the model ended it (EOS or a stop token)
  int64_t prefilled_tokens = 0, recomputed_tokens = 0;  // the engine's, over its turns
  std::string failure;  // why the session broke (the engine failed, its client went away mid-turn)
  bool opened() const { return !prompt.empty(); }
};

// What the loop does for one session request.
struct SessionTurnPlan {
  std::string key;
  SessionSpec spec;             // its sampling key; the prompt: the first request's (empty after it)
  std::vector<int32_t> append;  // appended before the turn (empty on the first request)
};

class ServeSessions {
 public:
  // The tokens that follow a chat session's last turn for the request's new messages (`tail`, after the
  // assistant message), up to the next assistant turn's first token; throws ServeError 400 on "messages" when it
  // cannot write them.
  using ChatTail = std::function<std::vector<int32_t>(const Json& tail, const std::vector<int32_t>& last_turn)>;

  // `sampling`: every turn's (max_new_tokens is the cap of a request's max_tokens); `tok` must outlive it.
  ServeSessions(const Tokenizer& tok, const SamplingParams& sampling, ChatTail chat_tail);

  // A session the harness may play, with its sampling key (the run's parameters with `seed`).
  void add(const std::string& key, uint64_t prompt_id, int64_t sample_index, uint64_t seed);
  // Forgets a session whose episode has ended (its record taken): its key takes no more requests.
  void remove(const std::string& key);

  // At most `turns` turns, and `tokens` sampled tokens, of each session from here to the next new_draw (0: no
  // limit).
  void set_draw_budget(int64_t turns, int64_t tokens);
  // At most `turns` turns in a session's life (agent.max_turns; 0: no limit): a request past them is a 400.
  void set_max_turns(int64_t turns);
  // A new draw: every session's turns and tokens counted from zero again (held requests may start, kept turns go
  // on).
  void new_draw();
  // The loop's side, as it admits a session's turn: whether it may start now (counted) or is held (false); and how
  // many tokens the session may still sample in this draw (INT64_MAX without a token budget).
  bool start_turn(const std::string& key);
  int64_t tokens_left(const std::string& key) const;

  // Where a session stands between the harness's requests.
  struct State {
    bool busy = false;    // a request is planned, running or held
    bool held = false;    // ... held: its turn waits for (or is kept to go on in) the next draw
    bool failed = false;
  };
  State state(const std::string& key) const;

  // The HTTP thread's side: checks that `request` (parsed, one of `key`'s) continues the session and rewrites it
  // as the turn runs: its prompt the session's whole sequence, its sampling the run's. Throws ServeError.
  SessionTurnPlan plan(const std::string& key, CompletionRequest& request, int64_t context);
  // The loop's side: the engine session that holds `key` now (-1: none; the loop opens one with the session's
  // history, the record's prompt and tokens), and its opening; a turn ended (recorded before its client reads the
  // answer); a turn failed (the session takes no more requests).
  int64_t engine_session(const std::string& key) const;
  void opened(const std::string& key, int64_t engine_session);
  void turn_done(const SessionTurnPlan& plan, const TurnResult& result);
  // The part of a turn the draw's tokens allowed (its request kept open): recorded, the session held; the turn goes
  // on in the next draw (more parts, the last one turn_done's).
  void turn_kept(const SessionTurnPlan& plan, const TurnResult& part);
  void turn_failed(const std::string& key, const std::string& why);

  // Every session's record (one never requested has none opened()), and the engine's ids of those opened.
  std::map<std::string, SessionRecord> records() const;
  SessionRecord record(const std::string& key) const;
  std::map<std::string, int64_t> engine_sessions() const;
  // Every session's engine session forgotten (closed with the engine that held them: a draw's).
  void forget_engine_sessions();

 private:
  struct Entry {
    uint64_t prompt_id = 0;
    int64_t sample_index = 0;
    uint64_t seed = 0;
    int64_t engine_session = -1;
    int64_t turns_this_draw = 0, tokens_this_draw = 0;
    int64_t open_turn = -1;  // where the turn in progress began in record.tokens (-1: none, or before its first part)
    SessionRecord record;
    enum class Kind { kChat, kText, kIds } kind = Kind::kIds;  // the first request's
    bool busy = false;       // a request runs (or is held)
    bool held = false;       // its request waits for the next draw
    Json messages;           // chat: the messages of the request whose turn ran last
    std::string text;        // text completions: the text so far
    Json pending_messages;   // the running request's, kept when its turn ends
    std::string pending_text;
  };
  Entry& find(const std::string& key);
  const Entry& find(const std::string& key) const;
  // A turn's part into the record: the request's additions before its first; the last closes the turn.
  void record_part(const SessionTurnPlan& plan, const TurnResult& part, bool last);
  // The tokens `request` adds to `e`'s session; throws ServeError naming the field.
  std::vector<int32_t> continuation(const Entry& e, const CompletionRequest& request) const;

  const Tokenizer& tok_;
  SamplingParams sampling_;
  ChatTail chat_tail_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  int64_t turn_budget_ = 0, token_budget_ = 0;
  int64_t max_turns_ = 0;
};

}  // namespace rlcpp
