#include "rollout/serve_response.h"

#include "rollout/stop_strings.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tool_calls.h"

namespace rlcpp {

namespace {

std::string sse(const Json& j) { return "data: " + json_text(j) + "\n\n"; }

// A token's text for log-prob lists, and its UTF-8 bytes (OpenAI's chat "bytes").
Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

const char* CompletionBuilder::finish_reason(const Choice& c, bool called) {
  return called ? "tool_calls" : openai_finish_reason(c.reason);
}

CompletionBuilder::CompletionBuilder(const CompletionRequest& request, const Tokenizer& tok, std::string id,
                                     std::string model, int64_t created)
    : request_(request), tok_(tok), id_(std::move(id)), model_(std::move(model)), created_(created),
      choices_(static_cast<size_t>(request.n)) {}

std::string response_text(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  // A model may have ids past its tokenizer's vocabulary (padding rows, random test weights): they have no text.
  std::vector<int32_t> known;
  for (int32_t id : ids)
    if (id < tok.vocab_size()) known.push_back(id);
  return tok.decode(known);
}

std::string CompletionBuilder::decode(const std::vector<int32_t>& ids) const { return response_text(tok_, ids); }

std::string CompletionBuilder::text(const Choice& c) const {
  std::string all = decode(c.tokens);
  all.resize(visible_length(all, request_.stop, /*finished=*/true));
  return all;
}

std::string CompletionBuilder::streamable_text(const Choice& c) const {
  const std::string all = decode(c.tokens);
  if (!c.finished && ends_in_partial_character(all)) return c.sent;
  std::string out = all.substr(0, visible_length(all, request_.stop, c.finished));
  // With tools, the text from the first <tool_call> on may be calls: it waits for the end, to be parsed.
  if (request_.parse_tool_calls && !c.finished) out.resize(visible_length(out, {kToolCallOpen}, false));
  return out;
}

Json CompletionBuilder::tool_calls_json(const std::vector<ParsedToolCall>& calls, size_t choice) const {
  Json out = Json::array();
  for (size_t k = 0; k < calls.size(); ++k)
    out.push_back({{"index", k},
                   {"id", "call_" + id_ + "_" + std::to_string(choice) + "_" + std::to_string(k)},
                   {"type", "function"},
                   {"function", {{"name", calls[k].name}, {"arguments", template_tojson(calls[k].arguments)}}}});
  return out;
}

Json CompletionBuilder::logprobs_json(const Choice& c, size_t from, size_t to) const {
  if (!request_.logprobs) return Json();
  if (request_.chat) {
    Json content = Json::array();
    for (size_t t = from; t < to; ++t) {
      const std::string s = decode({c.tokens[t]});
      Json top = Json::array();
      for (const TokenLogprob& a : c.top[t]) {
        const std::string as = decode({a.token});
        top.push_back({{"token", as}, {"logprob", a.logprob}, {"bytes", bytes_of(as)}, {"token_id", a.token}});
      }
      content.push_back({{"token", s}, {"logprob", c.logprobs[t]}, {"bytes", bytes_of(s)}, {"top_logprobs", top},
                         {"token_id", c.tokens[t]}});
    }
    return Json{{"content", content}};
  }
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  size_t offset = 0;
  for (size_t t = 0; t < from; ++t) offset += decode({c.tokens[t]}).size();
  for (size_t t = from; t < to; ++t) {
    const std::string s = decode({c.tokens[t]});
    tokens.push_back(s);
    lps.push_back(c.logprobs[t]);
    Json top = Json::object();
    for (const TokenLogprob& a : c.top[t]) top[decode({a.token})] = a.logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += s.size();
  }
  return Json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

Json CompletionBuilder::usage() const {
  int64_t completion = 0;
  for (const Choice& c : choices_) completion += static_cast<int64_t>(c.tokens.size());
  const int64_t prompt = static_cast<int64_t>(request_.prompt.size());
  return Json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

Json CompletionBuilder::chunk(Json choices) const {
  return Json{{"id", id_},
              {"object", request_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices", std::move(choices)}};
}

std::string CompletionBuilder::add(const JobUpdate& update) {
  std::vector<bool> touched(choices_.size(), false);
  for (const ChoiceToken& t : update.tokens) {
    Choice& c = choices_[static_cast<size_t>(t.choice)];
    c.tokens.push_back(t.token);
    c.logprobs.push_back(t.logprob);
    c.top.push_back(t.top);
    touched[static_cast<size_t>(t.choice)] = true;
  }
  for (const auto& [choice, reason] : update.finished) {
    choices_[static_cast<size_t>(choice)].finished = true;
    choices_[static_cast<size_t>(choice)].reason = reason;
    touched[static_cast<size_t>(choice)] = true;
  }
  if (!request_.stream) return "";
  std::string out;
  if (request_.chat && !role_sent_) {
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i)
      choices.push_back({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", Json()},
                         {"finish_reason", Json()}});
    out += sse(chunk(choices));
    role_sent_ = true;
  }
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (!touched[i]) continue;
    Choice& c = choices_[i];
    const std::string all = streamable_text(c);
    const size_t sent_before = c.sent.size();
    std::string delta;
    if (all.size() >= c.sent.size() && all.compare(0, c.sent.size(), c.sent) == 0) {
      delta = all.substr(c.sent.size());
      c.sent = all;
    }
    // The calls, and any text after them, in the last chunk.
    Json calls;
    if (c.finished && request_.parse_tool_calls) {
      const std::string whole = text(c);
      const ToolCallText after = parse_tool_calls(whole.substr(std::min(sent_before, whole.size())));
      if (!after.calls.empty()) {
        calls = tool_calls_json(after.calls, i);
        delta = after.text;
      }
    }
    const size_t from = c.logprobs_sent, to = c.tokens.size();
    c.logprobs_sent = to;
    Json choice{{"index", i}, {"logprobs", logprobs_json(c, from, to)},
                {"finish_reason", c.finished ? Json(finish_reason(c, !calls.is_null())) : Json()}};
    if (request_.chat) {
      choice["delta"] = delta.empty() && c.finished ? Json::object() : Json{{"content", delta}};
      if (!calls.is_null()) choice["delta"]["tool_calls"] = calls;
    } else {
      choice["text"] = delta;
    }
    if (request_.return_token_ids)
      choice["token_ids"] = std::vector<int32_t>(c.tokens.begin() + static_cast<std::ptrdiff_t>(from), c.tokens.end());
    out += sse(chunk(Json::array({choice})));
  }
  return out;
}

std::string CompletionBuilder::stream_end(bool include_usage) const {
  std::string out;
  if (include_usage) {
    Json j = chunk(Json::array());
    j["usage"] = usage();
    out += sse(j);
  }
  return out + "data: [DONE]\n\n";
}

Json CompletionBuilder::response() const {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    Json choice{{"index", i}, {"logprobs", logprobs_json(c, 0, c.tokens.size())}};
    const std::string all = text(c);
    // A text with no well-formed call is the content as written (a malformed block included).
    const ToolCallText read = request_.parse_tool_calls ? parse_tool_calls(all) : ToolCallText{};
    const bool called = !read.calls.empty();
    if (called) {
      choice["message"] = {{"role", "assistant"},
                           {"content", read.text.empty() ? Json() : Json(read.text)},
                           {"tool_calls", tool_calls_json(read.calls, i)}};
    } else if (request_.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", all}};
    } else {
      choice["text"] = all;
    }
    choice["finish_reason"] = finish_reason(c, called);
    if (request_.return_token_ids) {
      choice["token_ids"] = c.tokens;
      if (!request_.chat) choice["prompt_token_ids"] = request_.prompt;
    }
    choices.push_back(std::move(choice));
  }
  Json j{{"id", id_},
         {"object", request_.chat ? "chat.completion" : "text_completion"},
         {"created", created_},
         {"model", model_},
         {"choices", choices},
         {"usage", usage()}};
  if (request_.chat && request_.return_token_ids) j["prompt_token_ids"] = request_.prompt;
  return j;
}

}  // namespace rlcpp
