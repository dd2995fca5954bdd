#include "rollout/request_wire.h"

#include <cmath>
#include <cstdint>

namespace rlcpp {

namespace {

[[noreturn]] void fail(const std::string& message) { throw WireError(message); }

}  // namespace

// An integer past int64 (nlohmann stores 2^63..2^64-1 unsigned) would wrap in get<int64_t>(): it is out of
// range, and the message shows the number as it was sent.
int64_t read_header_int(const Json& h, const char* key, int64_t lo, int64_t hi) {
  auto it = h.find(key);
  if (it == h.end() || !it->is_number_integer()) fail(std::string("header '") + key + "' must be an integer");
  const bool past_int64 = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  const int64_t v = past_int64 ? 0 : it->get<int64_t>();
  if (past_int64 || v < lo || v > hi)
    fail(std::string("header '") + key + "' is " + it->dump() + ", expected " + std::to_string(lo) + ".." +
         std::to_string(hi));
  return v;
}

uint64_t read_request_id(const Json& h) {
  return static_cast<uint64_t>(read_header_int(h, "request_id", 0, INT64_MAX));
}

// Offsets (count+1) into a flat array of `total` elements: start at 0, never decrease, end at total.
void check_wire_offsets(const std::vector<int64_t>& offsets, int64_t total, const char* name) {
  if (offsets.empty() || offsets.front() != 0) fail(std::string("array '") + name + "' must start at 0");
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      fail(std::string("array '") + name + "' decreases at " + std::to_string(i) + " (" +
           std::to_string(offsets[i - 1]) + " then " + std::to_string(offsets[i]) + ")");
  if (offsets.back() != total)
    fail(std::string("array '") + name + "' ends at " + std::to_string(offsets.back()) + " but " +
         std::to_string(total) + " elements were sent");
}

int64_t header_request_id(const Json& header) {
  auto it = header.find("request_id");
  if (it == header.end() || !it->is_number_integer()) return -1;
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return -1;
  return it->get<int64_t>();
}

WireMessage encode_generate_request(const Request& request, uint64_t request_id) {
  WireMessage m("generate");
  m.header["request_id"] = request_id;
  m.header["n"] = request.n;
  m.header["sampling"] = config_to_json(request.sampling);
  std::vector<int64_t> offsets{0}, ids;
  std::vector<int32_t> tokens;
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    tokens.insert(tokens.end(), request.prompts[p].begin(), request.prompts[p].end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
    ids.push_back(static_cast<int64_t>(request.prompt_id(p)));
  }
  m.add("prompt_offsets", offsets);
  m.add("prompt_tokens", tokens);
  m.add("prompt_ids", ids);
  return m;
}

Request decode_generate_request(const WireMessage& m, const ModelConfig& model, const RequestLimits& limits,
                                uint64_t& request_id) {
  if (m.type() != "generate") fail("expected a 'generate' message, got '" + m.type() + "'");
  request_id = read_request_id(m.header);
  Request r;
  r.n = read_header_int(m.header, "n", 1, limits.max_n);
  auto sampling = m.header.find("sampling");
  if (sampling == m.header.end()) fail("header has no 'sampling' object");
  try {
    config_from_json(*sampling, r.sampling);
  } catch (const WireError&) {
    throw;
  } catch (const Error& e) {
    fail(std::string("sampling: ") + e.what());
  }

  const WireArray& off = m.array("prompt_offsets");
  if (off.shape.size() != 1) fail("array 'prompt_offsets' must be 1-d");
  const int64_t P = off.numel() - 1;
  if (P < 0 || P > limits.max_prompts)
    fail("request has " + std::to_string(P) + " prompts, the limit is " + std::to_string(limits.max_prompts));
  if (P * r.n > limits.max_sequences)
    fail("request asks for " + std::to_string(P) + " x " + std::to_string(r.n) + " sequences, the limit is " +
         std::to_string(limits.max_sequences));
  const std::vector<int64_t> offsets = m.get<int64_t>("prompt_offsets");
  const int64_t T = m.array("prompt_tokens").numel();
  if (T > limits.max_prompt_tokens)
    fail("request has " + std::to_string(T) + " prompt tokens, the limit is " + std::to_string(limits.max_prompt_tokens));
  check_wire_offsets(offsets, T, "prompt_offsets");
  const std::vector<int32_t> tokens = m.get<int32_t>("prompt_tokens", T);
  const std::vector<int64_t> ids = m.get<int64_t>("prompt_ids", P);
  r.prompts.resize(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) {
    r.prompts[p].assign(tokens.begin() + offsets[p], tokens.begin() + offsets[p + 1]);
    r.prompt_ids.push_back(static_cast<uint64_t>(ids[p]));
  }
  try {
    r.validate(model);
  } catch (const Error& e) {
    fail(e.what());
  }
  return r;
}

WireMessage encode_generate_result(const RolloutResult& result, uint64_t request_id) {
  WireMessage m("result");
  m.header["request_id"] = request_id;
  m.header["stats"] = result.stats.to_json();
  const size_t S = result.samples.size();
  std::vector<int64_t> offsets{0}, prompt_index, sample_index, versions, preemptions, top_k;
  std::vector<int32_t> tokens, reasons;
  std::vector<float> logprobs, temperature, top_p;
  std::vector<double> times;
  for (const Sample& s : result.samples) {
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    logprobs.insert(logprobs.end(), s.logprobs.begin(), s.logprobs.end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
    prompt_index.push_back(s.prompt_index);
    sample_index.push_back(s.sample_index);
    reasons.push_back(static_cast<int32_t>(s.finish_reason));
    versions.push_back(s.policy_version);
    versions.push_back(s.last_policy_version);
    preemptions.push_back(s.num_preemptions);
    times.insert(times.end(), {s.scheduled_s, s.first_token_s, s.finished_s});
    temperature.push_back(s.scoring.temperature);
    top_k.push_back(s.scoring.truncation.top_k);
    top_p.push_back(s.scoring.truncation.top_p);
  }
  m.add("sample_offsets", offsets);
  m.add("tokens", tokens);
  m.add("logprobs", logprobs);
  m.add("prompt_index", prompt_index);
  m.add("sample_index", sample_index);
  m.add("finish_reason", reasons);
  m.add("policy_version", versions, {static_cast<int64_t>(S), 2});
  m.add("num_preemptions", preemptions);
  m.add("times", times, {static_cast<int64_t>(S), 3});
  m.add("scoring_temperature", temperature);
  m.add("scoring_top_k", top_k);
  m.add("scoring_top_p", top_p);
  return m;
}

RolloutStats read_result_stats(const WireMessage& m) {
  const auto stats = m.header.find("stats");
  if (stats == m.header.end()) fail(m.type() + " header has no 'stats'");
  try {
    return RolloutStats::from_json(*stats);
  } catch (const Error& e) {
    fail(e.what());
  }
}

SampledRuns read_sampled_runs(const WireMessage& m, const char* offsets_name) {
  SampledRuns r;
  r.offsets = m.get<int64_t>(offsets_name);
  if (r.offsets.empty()) fail(std::string("array '") + offsets_name + "' is empty");
  const int64_t T = m.array("tokens").numel();
  check_wire_offsets(r.offsets, T, offsets_name);
  r.tokens = m.get<int32_t>("tokens", T);
  r.logprobs = m.get<float>("logprobs", T);
  return r;
}

FinishReason read_finish_reason(int32_t code, const std::string& what) {
  if (code < 0 || code > static_cast<int32_t>(FinishReason::kStop))
    fail(what + " has finish reason " + std::to_string(code));
  return static_cast<FinishReason>(code);
}

RolloutResult decode_generate_result(const WireMessage& m, uint64_t& request_id) {
  if (m.type() != "result") fail("expected a 'result' message, got '" + m.type() + "'");
  request_id = read_request_id(m.header);
  RolloutResult r;
  r.stats = read_result_stats(m);
  const SampledRuns runs = read_sampled_runs(m, "sample_offsets");
  const int64_t S = runs.count();
  const std::vector<int64_t>& offsets = runs.offsets;
  const std::vector<int32_t>& tokens = runs.tokens;
  const std::vector<float>& logprobs = runs.logprobs;
  const auto prompt_index = m.get<int64_t>("prompt_index", S);
  const auto sample_index = m.get<int64_t>("sample_index", S);
  const auto reasons = m.get<int32_t>("finish_reason", S);
  const auto versions = m.get<int64_t>("policy_version", 2 * S);
  const auto preemptions = m.get<int64_t>("num_preemptions", S);
  const auto times = m.get<double>("times", 3 * S);
  const auto temperature = m.get<float>("scoring_temperature", S);
  const auto top_k = m.get<int64_t>("scoring_top_k", S);
  const auto top_p = m.get<float>("scoring_top_p", S);
  r.samples.resize(static_cast<size_t>(S));
  for (int64_t i = 0; i < S; ++i) {
    Sample& s = r.samples[i];
    s.tokens.assign(tokens.begin() + offsets[i], tokens.begin() + offsets[i + 1]);
    s.logprobs.assign(logprobs.begin() + offsets[i], logprobs.begin() + offsets[i + 1]);
    s.prompt_index = prompt_index[i];
    s.sample_index = sample_index[i];
    s.finish_reason = read_finish_reason(reasons[i], "sample " + std::to_string(i));
    s.policy_version = versions[2 * i];
    s.last_policy_version = versions[2 * i + 1];
    s.num_preemptions = preemptions[i];
    s.scheduled_s = times[3 * i];
    s.first_token_s = times[3 * i + 1];
    s.finished_s = times[3 * i + 2];
    s.scoring = LogprobScoring{temperature[i], Truncation{top_k[i], top_p[i]}};
    try {
      check_logprob_scoring(s.scoring, "sample " + std::to_string(i) + " scoring");
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  return r;
}

}  // namespace rlcpp
