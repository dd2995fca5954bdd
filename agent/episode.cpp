#include "agent/episode.h"

#include "core/error.h"
#include "core/json_input.h"

namespace rlcpp {

std::vector<float> Episode::loss_mask() const {
  std::vector<float> mask(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) mask[i] = sources[i] == TokenSource::kModel ? 1.0f : 0.0f;
  return mask;
}

void Episode::add_model_tokens(const std::vector<int32_t>& ids, const std::vector<float>& logps, int64_t version,
                               bool ended) {
  RLCPP_CHECK(ids.size() == logps.size(), "episode: " << ids.size() << " sampled tokens with " << logps.size()
                                                      << " log-probs");
  const int64_t begin = static_cast<int64_t>(tokens.size());
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  logprobs.insert(logprobs.end(), logps.begin(), logps.end());
  sources.insert(sources.end(), ids.size(), TokenSource::kModel);
  versions.insert(versions.end(), ids.size(), version);
  turn_spans.emplace_back(begin, static_cast<int64_t>(tokens.size()));
  turn_ended.push_back(ended ? 1 : 0);
}

void Episode::add_environment_tokens(const std::vector<int32_t>& ids, const std::string& text, bool tool) {
  observation_texts.push_back(text);
  observation_tool.push_back(tool ? 1 : 0);
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  logprobs.insert(logprobs.end(), ids.size(), 0.0f);
  sources.insert(sources.end(), ids.size(), TokenSource::kEnvironment);
  versions.insert(versions.end(), ids.size(), -1);
  env_tokens += static_cast<int64_t>(ids.size());
}

Json episode_to_json(const Episode& e) {
  std::vector<int> sources;
  for (TokenSource s : e.sources) sources.push_back(static_cast<int>(s));
  Json spans = Json::array();
  for (const auto& [b, end] : e.turn_spans) spans.push_back({b, end});
  return {{"problem", {{"prompt", e.problem.prompt}, {"answer", e.problem.answer}, {"meta", e.problem.meta},
                       {"id", e.problem.id}}},
          {"group", e.group},
          {"sample_index", e.sample_index},
          {"seed", e.seed},
          {"first_step", e.first_step},
          {"prompt_text", e.prompt_text},
          {"observation_texts", e.observation_texts},
          {"observation_tool", e.observation_tool},
          {"prompt", e.prompt},
          {"tokens", e.tokens},
          {"sources", sources},
          {"logprobs", e.logprobs},
          {"versions", e.versions},
          {"turn_spans", spans},
          {"turn_ended", e.turn_ended},
          {"reward", e.reward},
          {"done", e.done},
          {"truncated", e.truncated},
          {"end_reason", e.end_reason},
          {"failure", e.failure},
          {"success", e.success ? Json(*e.success) : Json(nullptr)},
          {"tool_calls", e.tool_calls},
          {"tool_errors", e.tool_errors},
          {"env_tokens", e.env_tokens},
          {"env_seconds", e.env_seconds},
          {"prefilled_tokens", e.prefilled_tokens},
          {"recomputed_tokens", e.recomputed_tokens}};
}

Episode episode_from_json(const Json& j, const std::string& where) {
  Episode e;
  const Json& p = json_field(j, "problem", where);
  e.problem = {json_get<std::string>(p, "prompt", where), json_get<std::string>(p, "answer", where),
               json_field(p, "meta", where), json_get<uint64_t>(p, "id", where)};
  e.group = json_get<int64_t>(j, "group", where);
  e.sample_index = json_get<int64_t>(j, "sample_index", where);
  e.seed = json_get<uint64_t>(j, "seed", where);
  e.first_step = json_get<int64_t>(j, "first_step", where);
  e.prompt_text = json_get<std::string>(j, "prompt_text", where);
  e.observation_texts = json_get<std::vector<std::string>>(j, "observation_texts", where);
  e.observation_tool = json_get<std::vector<uint8_t>>(j, "observation_tool", where);
  RLCPP_CHECK(e.observation_tool.size() == e.observation_texts.size(),
              where << ": " << e.observation_texts.size() << " observation texts but " << e.observation_tool.size()
                    << " observation_tool flags");
  e.prompt = json_get<std::vector<int32_t>>(j, "prompt", where);
  e.tokens = json_get<std::vector<int32_t>>(j, "tokens", where);
  for (int s : json_get<std::vector<int>>(j, "sources", where)) {
    RLCPP_CHECK(s == 0 || s == 1, where << ": key 'sources' holds " << s << " (0 model, 1 environment)");
    e.sources.push_back(static_cast<TokenSource>(s));
  }
  e.logprobs = json_get<std::vector<float>>(j, "logprobs", where);
  e.versions = json_get<std::vector<int64_t>>(j, "versions", where);
  for (const auto& span : json_get<std::vector<std::vector<int64_t>>>(j, "turn_spans", where)) {
    RLCPP_CHECK(span.size() == 2 && span[0] >= 0 && span[0] <= span[1] &&
                    span[1] <= static_cast<int64_t>(e.tokens.size()),
                where << ": key 'turn_spans' holds a span outside the episode's " << e.tokens.size() << " tokens");
    e.turn_spans.emplace_back(span[0], span[1]);
  }
  e.turn_ended = json_get<std::vector<uint8_t>>(j, "turn_ended", where);
  RLCPP_CHECK(e.turn_ended.size() == e.turn_spans.size(),
              where << ": " << e.turn_spans.size() << " turns but " << e.turn_ended.size() << " turn_ended flags");
  const size_t n = e.tokens.size();
  RLCPP_CHECK(e.sources.size() == n && e.logprobs.size() == n && e.versions.size() == n,
              where << ": " << n << " tokens but " << e.sources.size() << " sources, " << e.logprobs.size()
                    << " log-probs, " << e.versions.size() << " versions");
  e.reward = json_get<double>(j, "reward", where);
  e.done = json_get<bool>(j, "done", where);
  e.truncated = json_get<bool>(j, "truncated", where);
  e.end_reason = json_get<std::string>(j, "end_reason", where);
  e.failure = json_get<std::string>(j, "failure", where);
  if (const Json& s = json_field(j, "success", where); !s.is_null()) e.success = json_get<bool>(j, "success", where);
  e.tool_calls = json_get<int64_t>(j, "tool_calls", where);
  e.tool_errors = json_get<int64_t>(j, "tool_errors", where);
  e.env_tokens = json_get<int64_t>(j, "env_tokens", where);
  e.env_seconds = json_get<double>(j, "env_seconds", where);
  e.prefilled_tokens = json_get<int64_t>(j, "prefilled_tokens", where);
  e.recomputed_tokens = json_get<int64_t>(j, "recomputed_tokens", where);
  return e;
}

}  // namespace rlcpp
