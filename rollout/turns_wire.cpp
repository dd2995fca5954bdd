#include "rollout/turns_wire.h"

#include <algorithm>
#include <bit>
#include <set>

namespace rlcpp {

namespace {

[[noreturn]] void fail(const std::string& message) { throw WireError(message); }

// Token lists one after another, with their offsets.
template <class Item, class Tokens>
void add_token_lists(WireMessage& m, const std::vector<Item>& items, Tokens tokens_of, const char* offsets_name,
                     const char* tokens_name) {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> tokens;
  for (const Item& item : items) {
    const std::vector<int32_t>& t = tokens_of(item);
    tokens.insert(tokens.end(), t.begin(), t.end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
  }
  m.add(offsets_name, offsets);
  m.add(tokens_name, tokens);
}

// The token lists of `count` items, each checked against the vocabulary.
std::vector<std::vector<int32_t>> read_token_lists(const WireMessage& m, int64_t count, const char* offsets_name,
                                                   const char* tokens_name, int64_t vocab, int64_t max_tokens) {
  const std::vector<int64_t> offsets = m.get<int64_t>(offsets_name, count + 1);
  const int64_t T = m.array(tokens_name).numel();
  if (T > max_tokens)
    fail(std::string("array '") + tokens_name + "' has " + std::to_string(T) + " tokens, the limit is " +
         std::to_string(max_tokens));
  check_wire_offsets(offsets, T, offsets_name);
  const std::vector<int32_t> tokens = m.get<int32_t>(tokens_name, T);
  for (int64_t i = 0; i < T; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      fail(std::string("array '") + tokens_name + "' element " + std::to_string(i) + " is token " +
           std::to_string(tokens[i]) + ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[i].assign(tokens.begin() + offsets[i], tokens.begin() + offsets[i + 1]);
  return out;
}

// A 1-d int64 array of at most `limit` elements.
std::vector<int64_t> read_ids(const WireMessage& m, const char* name, int64_t limit, int64_t expected = -1) {
  const int64_t n = m.array(name).numel();
  if (n > limit) fail(std::string("array '") + name + "' has " + std::to_string(n) + " elements, the limit is " +
                      std::to_string(limit));
  return m.get<int64_t>(name, expected);
}

}  // namespace

SamplingParams turn_sampling(const SamplingParams& base, int64_t max_new_tokens, uint64_t seed,
                             const std::vector<int64_t>& stop_tokens) {
  SamplingParams s = base;
  s.max_new_tokens = max_new_tokens;
  s.seed = seed;
  s.ignore_eos = false;
  for (int64_t t : stop_tokens)
    if (std::find(s.stop_tokens.begin(), s.stop_tokens.end(), t) == s.stop_tokens.end()) s.stop_tokens.push_back(t);
  return s;
}

WireMessage encode_turns_request(const TurnsCall& call, uint64_t request_id) {
  WireMessage m("turns");
  m.header["request_id"] = request_id;
  m.header["reset"] = call.reset;
  m.header["sampling"] = config_to_json(call.sampling);
  m.header["stop_tokens"] = call.stop_tokens;
  m.add("closes", call.closes);
  std::vector<int64_t> open_sessions, open_ids, open_sample_index;
  for (const TurnsCall::Open& o : call.opens) {
    open_sessions.push_back(o.session);
    open_ids.push_back(std::bit_cast<int64_t>(o.spec.prompt_id));
    open_sample_index.push_back(o.spec.sample_index);
  }
  m.add("open_sessions", open_sessions);
  m.add("open_ids", open_ids);
  m.add("open_sample_index", open_sample_index);
  add_token_lists(m, call.opens, [](const TurnsCall::Open& o) -> const std::vector<int32_t>& { return o.spec.prompt; },
                  "open_offsets", "open_tokens");
  std::vector<int64_t> append_sessions;
  for (const TurnsCall::Append& a : call.appends) append_sessions.push_back(a.session);
  m.add("append_sessions", append_sessions);
  add_token_lists(m, call.appends, [](const TurnsCall::Append& a) -> const std::vector<int32_t>& { return a.tokens; },
                  "append_offsets", "append_tokens");
  std::vector<int64_t> turn_sessions, turn_max, turn_seeds;
  for (const TurnsCall::Turn& t : call.turns) {
    turn_sessions.push_back(t.session);
    turn_max.push_back(t.max_new_tokens);
    turn_seeds.push_back(std::bit_cast<int64_t>(t.seed));
  }
  m.add("turn_sessions", turn_sessions);
  m.add("turn_max_new_tokens", turn_max);
  m.add("turn_seeds", turn_seeds);
  return m;
}

TurnsCall decode_turns_request(const WireMessage& m, const ModelConfig& model, const RequestLimits& limits,
                               uint64_t& request_id) {
  if (m.type() != "turns") fail("expected a 'turns' message, got '" + m.type() + "'");
  request_id = read_request_id(m.header);
  TurnsCall call;
  const auto reset = m.header.find("reset");
  if (reset == m.header.end() || !reset->is_boolean()) fail("header 'reset' must be true or false");
  call.reset = reset->get<bool>();
  const auto sampling = m.header.find("sampling");
  if (sampling == m.header.end()) fail("header has no 'sampling' object");
  try {
    config_from_json(*sampling, call.sampling);
  } catch (const WireError&) {
    throw;
  } catch (const Error& e) {
    fail(std::string("sampling: ") + e.what());
  }
  const auto stops = m.header.find("stop_tokens");
  if (stops == m.header.end() || !stops->is_array()) fail("header 'stop_tokens' must be an array of token ids");
  for (const Json& t : *stops) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.vocab_size)
      fail("header 'stop_tokens' holds " + t.dump() + ", not a token id in [0, " + std::to_string(model.vocab_size) +
           ")");
    call.stop_tokens.push_back(t.get<int64_t>());
  }

  const int64_t max_sessions = limits.max_sequences;
  call.closes = read_ids(m, "closes", max_sessions);
  const std::vector<int64_t> open_sessions = read_ids(m, "open_sessions", limits.max_prompts);
  const int64_t O = static_cast<int64_t>(open_sessions.size());
  const std::vector<int64_t> open_ids = read_ids(m, "open_ids", O, O);
  const std::vector<int64_t> open_sample_index = read_ids(m, "open_sample_index", O, O);
  const auto prompts = read_token_lists(m, O, "open_offsets", "open_tokens", model.vocab_size, limits.max_prompt_tokens);
  std::set<int64_t> opened;
  for (int64_t i = 0; i < O; ++i) {
    if (!opened.insert(open_sessions[i]).second)
      fail("array 'open_sessions' opens session " + std::to_string(open_sessions[i]) + " twice");
    if (prompts[i].empty() || static_cast<int64_t>(prompts[i].size()) >= model.max_position_embeddings)
      fail("open " + std::to_string(i) + " (session " + std::to_string(open_sessions[i]) + ") has a prompt of " +
           std::to_string(prompts[i].size()) + " tokens: at least 1 and fewer than the context of " +
           std::to_string(model.max_position_embeddings));
    if (open_sample_index[i] < 0)
      fail("array 'open_sample_index' element " + std::to_string(i) + " is " + std::to_string(open_sample_index[i]));
    call.opens.push_back({open_sessions[i], {prompts[i], std::bit_cast<uint64_t>(open_ids[i]), open_sample_index[i]}});
  }
  const std::vector<int64_t> append_sessions = read_ids(m, "append_sessions", max_sessions);
  const int64_t A = static_cast<int64_t>(append_sessions.size());
  const auto appended = read_token_lists(m, A, "append_offsets", "append_tokens", model.vocab_size,
                                         limits.max_prompt_tokens);
  for (int64_t i = 0; i < A; ++i) call.appends.push_back({append_sessions[i], appended[i]});
  const std::vector<int64_t> turn_sessions = read_ids(m, "turn_sessions", max_sessions);
  const int64_t K = static_cast<int64_t>(turn_sessions.size());
  const std::vector<int64_t> turn_max = read_ids(m, "turn_max_new_tokens", K, K);
  const std::vector<int64_t> turn_seeds = read_ids(m, "turn_seeds", K, K);
  std::set<int64_t> turned;
  for (int64_t i = 0; i < K; ++i) {
    if (!turned.insert(turn_sessions[i]).second)
      fail("array 'turn_sessions' asks session " + std::to_string(turn_sessions[i]) + " for two turns");
    if (turn_max[i] < 1 || turn_max[i] >= model.max_position_embeddings)
      fail("array 'turn_max_new_tokens' element " + std::to_string(i) + " is " + std::to_string(turn_max[i]) +
           ", expected 1.." + std::to_string(model.max_position_embeddings - 1));
    call.turns.push_back({turn_sessions[i], turn_max[i], std::bit_cast<uint64_t>(turn_seeds[i])});
  }
  try {
    for (const TurnsCall::Turn& t : call.turns)
      turn_sampling(call.sampling, t.max_new_tokens, t.seed, call.stop_tokens).validate("sampling", model.vocab_size);
  } catch (const Error& e) {
    fail(e.what());
  }
  return call;
}

WireMessage encode_turns_result(const TurnsResult& result, uint64_t request_id) {
  WireMessage m("turns_result");
  m.header["request_id"] = request_id;
  m.header["stats"] = result.stats.to_json();
  std::vector<int64_t> offsets{0}, versions, prefilled, recomputed;
  std::vector<int32_t> tokens, reasons;
  std::vector<float> logprobs;
  for (const TurnResult& t : result.turns) {
    tokens.insert(tokens.end(), t.tokens.begin(), t.tokens.end());
    logprobs.insert(logprobs.end(), t.logprobs.begin(), t.logprobs.end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
    reasons.push_back(static_cast<int32_t>(t.finish_reason));
    versions.push_back(t.policy_version);
    prefilled.push_back(t.prefilled_tokens);
    recomputed.push_back(t.recomputed_tokens);
  }
  m.add("offsets", offsets);
  m.add("tokens", tokens);
  m.add("logprobs", logprobs);
  m.add("finish_reason", reasons);
  m.add("policy_version", versions);
  m.add("prefilled", prefilled);
  m.add("recomputed", recomputed);
  return m;
}

TurnsResult decode_turns_result(const WireMessage& m, uint64_t& request_id) {
  if (m.type() != "turns_result") fail("expected a 'turns_result' message, got '" + m.type() + "'");
  request_id = read_request_id(m.header);
  TurnsResult r;
  r.stats = read_result_stats(m);
  const SampledRuns runs = read_sampled_runs(m, "offsets");
  const int64_t K = runs.count();
  const auto reasons = m.get<int32_t>("finish_reason", K);
  const auto versions = m.get<int64_t>("policy_version", K);
  const auto prefilled = m.get<int64_t>("prefilled", K);
  const auto recomputed = m.get<int64_t>("recomputed", K);
  for (int64_t i = 0; i < K; ++i) {
    TurnResult t;
    t.tokens.assign(runs.tokens.begin() + runs.offsets[i], runs.tokens.begin() + runs.offsets[i + 1]);
    t.logprobs.assign(runs.logprobs.begin() + runs.offsets[i], runs.logprobs.begin() + runs.offsets[i + 1]);
    t.finish_reason = read_finish_reason(reasons[i], "turn " + std::to_string(i));
    t.policy_version = versions[i];
    t.prefilled_tokens = prefilled[i];
    t.recomputed_tokens = recomputed[i];
    r.turns.push_back(std::move(t));
  }
  return r;
}

}  // namespace rlcpp
