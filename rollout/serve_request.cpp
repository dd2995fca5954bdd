#include "rollout/serve_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"
#include "kernels/temperature.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tool_calls.h"

namespace rlcpp {

const char* ServeError::type() const {
  switch (status_) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: case 500: return "server_error";
    default: return "invalid_request_error";
  }
}

std::string json_text(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json ServeError::to_json() const {
  return Json{{"error", {{"message", what()},
                         {"type", type()},
                         {"param", param_.empty() ? Json() : Json(param_)},
                         {"code", status_}}}};
}

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& message) {
  throw ServeError(400, field, "\"" + field + "\": " + message);
}

int64_t integer_field(const Json& j, const std::string& field, int64_t lo, int64_t hi) {
  const Json& v = j.at(field);
  if (!v.is_number_integer()) bad(field, "must be an integer, got " + json_text(v));
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (x < lo || x > hi) bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                       std::to_string(x));
  return x;
}

double number_field(const Json& j, const std::string& field, double lo, double hi) {
  const Json& v = j.at(field);
  if (!v.is_number()) bad(field, "must be a number, got " + json_text(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + json_text(v));
  return x;
}

bool bool_field(const Json& j, const std::string& field) {
  const Json& v = j.at(field);
  if (!v.is_boolean()) bad(field, "must be true or false, got " + json_text(v));
  return v.get<bool>();
}

std::vector<int32_t> token_array(const Json& v, const std::string& field, int64_t vocab_size) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& t = v[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size)
      bad(field, "token " + std::to_string(i) + " is " + json_text(t) + ", not an id in [0, " +
                     std::to_string(vocab_size) + ")");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::vector<int32_t> completion_prompt(const Json& v, const Tokenizer& tok, int64_t vocab_size) {
  // "text", ["text"], [ids] or [[ids]]: one prompt per request (n samples it several times).
  const Json* p = &v;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    try {
      return tok.encode_prompt(p->get<std::string>(), Json());
    } catch (const Error& e) {
      bad("prompt", e.what());
    }
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_number()) return token_array(*p, "prompt", vocab_size);
  bad("prompt", "must be a string, a list of token ids, or a list holding one of them (one prompt per request; "
                "use \"n\" for several samples)");
}

// OpenAI's "tools": [{"type": "function", "function": {"name", "description", "parameters"}}], each as the chat
// template's `tojson` writes it (keys in the order the client sent them: `tools` is the body's, parsed keeping order).
std::vector<std::string> chat_tools(const OrderedJson& tools) {
  if (!tools.is_array()) bad("tools", "must be a list of {\"type\": \"function\", \"function\": {...}}");
  std::vector<std::string> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& t = tools[i];
    const std::string at = "tool " + std::to_string(i);
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object())
      bad("tools", at + " must be {\"type\": \"function\", \"function\": {\"name\", \"description\", "
                        "\"parameters\"}}, got " + json_text(Json(t)).substr(0, 120));
    const OrderedJson& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      bad("tools", at + ": \"function\" needs \"name\" as a non-empty string");
    if (f.contains("description") && !f["description"].is_string())
      bad("tools", at + ": \"description\" must be a string");
    if (f.contains("parameters") && !f["parameters"].is_object())
      bad("tools", at + ": \"parameters\" must be a JSON schema object");
    out.push_back(template_tojson(t));
  }
  return out;
}

std::vector<int32_t> chat_prompt(const Json& messages, const std::vector<std::string>& tools, const Tokenizer& tok) {
  if (!messages.is_array() || messages.empty()) bad("messages", "must be a non-empty list of {\"role\", \"content\"}");
  try {
    return tok.encode_prompt("", messages, tools);
  } catch (const Error& e) {
    // The template refuses tools it cannot render: that names "tools"; anything else is the conversation's.
    const bool template_lacks_tools = !tools.empty() && std::string(e.what()).find("tools") != std::string::npos;
    bad(template_lacks_tools ? "tools" : "messages", e.what());
  }
}

// "stop": a string or a list of up to kMaxStopStrings non-empty strings.
std::vector<std::string> stop_strings(const Json& v) {
  if (!v.is_string() && !(v.is_array() && v.size() <= kMaxStopStrings))
    bad("stop", "must be a string or a list of at most " + std::to_string(kMaxStopStrings) + " strings");
  std::vector<std::string> out;
  for (const Json& s : v.is_string() ? Json::array({v}) : v) {
    if (!s.is_string()) bad("stop", "must be a string or a list of strings, got " + json_text(s));
    out.push_back(s.get<std::string>());
  }
  for (const std::string& s : out)
    if (s.empty()) bad("stop", "a stop string must not be empty");
  return out;
}

}  // namespace

std::optional<std::string> completion_prompt_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && v.size() == 1 && v[0].is_string()) return v[0].get<std::string>();
  return std::nullopt;
}

CompletionRequest parse_completion_request(const std::string& body, bool chat, const Tokenizer& tok,
                                           const std::string& model_name, int64_t context, int64_t vocab_size,
                                           const ServeLimits& limits, bool session) {
  Json j;
  try {
    j = Json::parse(body);
  } catch (const std::exception& e) {
    throw ServeError(400, "", std::string("the body is not JSON: ") + e.what());
  }
  if (!j.is_object()) throw ServeError(400, "", "the body must be a JSON object, got " + json_text(j).substr(0, 80));
  std::set<std::string> known = {"model",          "max_tokens",     "n",      "temperature",    "top_p",
                                 "top_k",          "min_p",          "seed",   "stream",         "stream_options",
                                 "stop",           "stop_token_ids", "ignore_eos", "return_token_ids", "user",
                                 "logprobs"};
  if (chat) {
    known.insert({"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice"});
  } else {
    known.insert({"prompt", "echo"});
  }
  for (const auto& [key, value] : j.items())
    if (!known.count(key))
      throw ServeError(400, key, "\"" + key + "\" is not a field this server accepts (" +
                                     std::string(chat ? "/v1/chat/completions" : "/v1/completions") + ")");
  // null means "not given", as OpenAI's clients send it.
  const auto given = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };

  CompletionRequest r;
  r.chat = chat;
  if (given("model")) {
    if (!j["model"].is_string()) bad("model", "must be a string");
    if (j["model"].get<std::string>() != model_name)
      throw ServeError(404, "model", "\"model\": \"" + j["model"].get<std::string>() +
                                         "\" is not served here; this server serves \"" + model_name + "\"");
  }
  if (chat) {
    if (!given("messages")) bad("messages", "is required");
    std::vector<std::string> tools;
    if (given("tools")) tools = chat_tools(OrderedJson::parse(body)["tools"]);
    std::string tool_choice = "auto";
    if (given("tool_choice")) {
      if (!j["tool_choice"].is_string() || (j["tool_choice"] != "auto" && j["tool_choice"] != "none"))
        bad("tool_choice", "only \"auto\" and \"none\" are supported (a named or required function is not), got " +
                               json_text(j["tool_choice"]));
      tool_choice = j["tool_choice"].get<std::string>();
    }
    // "none": the tools are still listed (the prompt is the same, as vLLM renders it) but no call is parsed.
    r.parse_tool_calls = !tools.empty() && tool_choice == "auto";
    r.prompt = chat_prompt(j["messages"], tools, tok);
    r.messages = j["messages"];
  } else {
    if (!given("prompt")) bad("prompt", "is required");
    r.prompt_value = j["prompt"];
    if (!session || !completion_prompt_text(r.prompt_value)) r.prompt = completion_prompt(j["prompt"], tok, vocab_size);
    if (given("echo") && bool_field(j, "echo")) bad("echo", "true is not supported");
  }
  const std::string prompt_field = chat ? "messages" : "prompt";
  const bool deferred = session && !chat && completion_prompt_text(r.prompt_value);
  if (r.prompt.empty() && !deferred) bad(prompt_field, "encodes to no tokens");
  if (static_cast<int64_t>(r.prompt.size()) >= context)
    bad(prompt_field, "has " + std::to_string(r.prompt.size()) + " tokens; the served context of " +
                          std::to_string(context) + " leaves no room for a new token");

  const char* max_key = chat && given("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  SamplingParams& s = r.sampling;
  s.max_new_tokens = given(max_key) ? integer_field(j, max_key, 1, limits.max_tokens)
                                    : std::min<int64_t>(16, limits.max_tokens);
  if (given("n")) r.n = integer_field(j, "n", 1, limits.max_n);
  if (given("temperature")) {
    s.temperature = static_cast<float>(number_field(j, "temperature", 0, 100));
    if (s.temperature != 0 && s.temperature < kMinTemperature)
      bad("temperature", "must be 0 (greedy) or >= 0.001 (colder overflows fp32), got " + json_text(j["temperature"]));
  }
  if (given("top_p")) {
    s.top_p = static_cast<float>(number_field(j, "top_p", 0, 1));
    if (s.top_p <= 0) bad("top_p", "must be in (0, 1], got " + json_text(j["top_p"]));
  }
  if (given("top_k")) s.top_k = std::max<int64_t>(0, integer_field(j, "top_k", -1, vocab_size));  // -1, 0: off
  if (given("min_p")) s.min_p = static_cast<float>(number_field(j, "min_p", 0, 1));
  if (given("seed")) {
    s.seed = static_cast<uint64_t>(integer_field(j, "seed", 0, std::numeric_limits<int64_t>::max()));
    r.seeded = true;
  }
  if (given("stream")) r.stream = bool_field(j, "stream");
  if (given("stream_options")) {
    const Json& o = j["stream_options"];
    if (!o.is_object() || (o.size() == 1 && !o.contains("include_usage")) || o.size() > 1)
      bad("stream_options", "only {\"include_usage\": bool} is accepted");
    if (o.contains("include_usage")) r.include_usage = bool_field(o, "include_usage");
  }
  if (given("stop")) r.stop = stop_strings(j["stop"]);
  if (given("stop_token_ids")) {
    if (!j["stop_token_ids"].is_array()) bad("stop_token_ids", "must be a list of token ids");
    for (int32_t t : token_array(j["stop_token_ids"], "stop_token_ids", vocab_size)) s.stop_tokens.push_back(t);
  }
  if (given("ignore_eos")) s.ignore_eos = bool_field(j, "ignore_eos");
  if (given("return_token_ids")) r.return_token_ids = bool_field(j, "return_token_ids");
  if (given("user") && !j["user"].is_string()) bad("user", "must be a string");
  if (chat) {
    if (given("logprobs")) r.logprobs = bool_field(j, "logprobs");
    if (given("top_logprobs")) {
      r.top_logprobs = integer_field(j, "top_logprobs", 0, limits.max_top_logprobs);
      if (!r.logprobs && r.top_logprobs > 0) bad("top_logprobs", "needs \"logprobs\": true");
    }
  } else if (given("logprobs")) {  // completions: an integer, the alternatives per token
    r.logprobs = true;
    r.top_logprobs = integer_field(j, "logprobs", 0, limits.max_top_logprobs);
  }
  try {
    s.validate("request", vocab_size);
  } catch (const Error& e) {
    throw ServeError(400, "", e.what());
  }
  return r;
}

}  // namespace rlcpp
