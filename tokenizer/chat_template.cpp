#include "tokenizer/chat_template.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace rlcpp {

namespace {

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string strip_chars(const std::string& s, const char* chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) b = s.find_first_not_of(chars);
  if (b == std::string::npos) return "";
  if (right) e = s.find_last_not_of(chars) + 1;
  return s.substr(b, e - b);
}

// Python's str.strip() on ASCII whitespace, which is Jinja's trim on the texts a chat carries.
std::string trim(const std::string& s) { return strip_chars(s, " \t\n\r\v\f", true, true); }

// The text of a ChatML template's built-in system message: '<|im_start|>system\n' followed by plain text up to
// '<|im_end|>' (not by the first message's content); "" when there is none.
std::string default_system_message(const std::string& tmpl) {
  const std::string head = "<|im_start|>system\\n";
  for (size_t at = tmpl.find(head); at != std::string::npos; at = tmpl.find(head, at + 1)) {
    const size_t begin = at + head.size(), end = tmpl.find("<|im_end|>", begin);
    if (end == std::string::npos) break;
    const std::string text = tmpl.substr(begin, end - begin);
    if (!text.empty() && text.find_first_of("'\"{}+") == std::string::npos) return text;
  }
  return "";
}

std::string after_last(const std::string& s, const std::string& sep) {
  const size_t at = s.rfind(sep);
  return at == std::string::npos ? s : s.substr(at + sep.size());
}

std::string before_first(const std::string& s, const std::string& sep) { return s.substr(0, s.find(sep)); }

}  // namespace

std::string template_tojson(const nlohmann::ordered_json& value) {
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += (first ? "" : ", ") + nlohmann::ordered_json(key).dump(-1, ' ', false) + ": " + template_tojson(item);
      first = false;
    }
    return out + "}";
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + template_tojson(value[i]);
    return out + "]";
  }
  return value.dump(-1, ' ', /*ensure_ascii=*/false);
}

namespace {

// OpenAI's [{"id", "type": "function", "function": {"name", "arguments"}}] of an assistant message; "arguments" a
// JSON string (written as given, as Qwen3's template writes a string) or an object (written by `tojson`, keys in
// sorted order).
std::vector<ChatToolCall> tool_calls_from_json(const Json& calls, const std::string& at) {
  RLCPP_CHECK(calls.is_array(), at << ": \"tool_calls\" must be a list, got " << json_excerpt(calls));
  std::vector<ChatToolCall> out;
  for (size_t k = 0; k < calls.size(); ++k) {
    const Json& c = calls[k];
    const std::string where = at + ": tool call " + std::to_string(k);
    RLCPP_CHECK(c.is_object() && c.contains("function") && c["function"].is_object() &&
                    c["function"].contains("name") && c["function"]["name"].is_string() &&
                    c["function"].contains("arguments") &&
                    (c["function"]["arguments"].is_string() || c["function"]["arguments"].is_object()),
                where << " must be {\"type\": \"function\", \"function\": {\"name\": string, \"arguments\": "
                         "string or object}}, got " << json_excerpt(c));
    RLCPP_CHECK(!c.contains("type") || c["type"] == "function",
                where << ": \"type\" must be \"function\", got " << json_excerpt(c["type"]));
    const Json& args = c["function"]["arguments"];
    out.push_back({c["function"]["name"].get<std::string>(),
                   args.is_string() ? args.get<std::string>() : template_tojson(nlohmann::ordered_json(args))});
  }
  return out;
}

}  // namespace

std::vector<ChatMessage> chat_messages_from_json(const Json& messages, const std::string& where) {
  RLCPP_CHECK(messages.is_array() && !messages.empty(),
              where << ": \"messages\" must be a non-empty list of {\"role\", \"content\"}, got " << json_excerpt(messages));
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string at = where + ": message " + std::to_string(i);
    RLCPP_CHECK(m.is_object() && m.contains("role") && m["role"].is_string(),
                at << " must be {\"role\": string, \"content\": string}, got " << json_excerpt(m));
    const std::string role = m["role"].get<std::string>();
    RLCPP_CHECK(role == "system" || role == "user" || role == "assistant" || role == "tool",
                at << ": role \"" << role << "\" (expected system, user, assistant or tool)");
    RLCPP_CHECK(role != "system" || i == 0, at << ": a system message must come first");
    const bool calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
    // An assistant message that only calls tools may have no content (OpenAI's clients send null).
    const bool content_optional = calls && (!m.contains("content") || m["content"].is_null());
    RLCPP_CHECK(content_optional || (m.contains("content") && m["content"].is_string()),
                at << " must be {\"role\": string, \"content\": string}, got " << json_excerpt(m));
    for (const auto& [key, value] : m.items())
      RLCPP_CHECK(key == "role" || key == "content" || (key == "tool_calls" && role == "assistant") ||
                      (key == "tool_call_id" && role == "tool"),
                  at << ": unknown key \"" << key << "\" (role and content; tool_calls in an assistant message, "
                        "tool_call_id in a tool message)");
    out.push_back({role, content_optional ? "" : m["content"].get<std::string>(),
                   calls ? tool_calls_from_json(m["tool_calls"], at) : std::vector<ChatToolCall>{}});
  }
  return out;
}

ChatTemplate ChatTemplate::recognise(const std::string& tmpl, const std::string& where) {
  ChatTemplate t;
  if (contains(tmpl, "<|im_start|>")) {
    t.family_ = Family::kChatML;
    t.thinking_ = contains(tmpl, "reasoning_content") && contains(tmpl, "<think>");
    t.default_system_ = default_system_message(tmpl);
    for (size_t at = t.default_system_.find("\\n"); at != std::string::npos; at = t.default_system_.find("\\n", at))
      t.default_system_.replace(at, 2, "\n");
    return t;
  }
  if (contains(tmpl, "<|start_header_id|>") && contains(tmpl, "<|eot_id|>")) {
    RLCPP_CHECK(!contains(tmpl, "Cutting Knowledge Date"),
                where << ": a Llama-3.1+ chat template (it writes today's date into the system header) is not "
                         "supported; Llama-3's is");
    t.family_ = Family::kLlama3;
    return t;
  }
  RLCPP_FAIL(where << ": chat_template is not one rlcpp knows: ChatML (Qwen2, Qwen2.5, Qwen3) and Llama-3 are "
                      "supported (rlcpp renders the family's format, it does not run Jinja)");
}

std::optional<ChatTemplate> ChatTemplate::of_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path file = dir / "tokenizer_config.json";
  if (!fs::exists(file)) return std::nullopt;
  return of_tokenizer_config(load_json_file(file.string(), kTokenizerInput.named("a tokenizer_config.json")),
                             file.string());
}

std::optional<ChatTemplate> ChatTemplate::of_tokenizer_config(const Json& config, const std::string& where) {
  RLCPP_CHECK(config.is_object(), where << ": expected a JSON object, got " << json_excerpt(config));
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  RLCPP_CHECK(it->is_string(), where << ": \"chat_template\" must be a string (named templates are not "
                                        "supported), got " << json_excerpt(*it));
  return recognise(it->get<std::string>(), where);
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                bool enable_thinking) const {
  return render(messages, add_generation_prompt, enable_thinking).text;
}

RenderedChat ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                  bool enable_thinking, const std::vector<std::string>& tools) const {
  const bool tooling = !tools.empty() || std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
    return m.role == "tool" || !m.tool_calls.empty();
  });
  RLCPP_CHECK(!tooling || supports_tools(), "chat template: tools, tool calls and tool messages are rendered for "
                                            "Qwen3's template only (the ChatML template with <think> handling)");
  for (size_t i = 0; i < messages.size(); ++i)
    RLCPP_CHECK(messages[i].tool_calls.empty() || messages[i].role == "assistant",
                "chat template: message " << i << " (" << messages[i].role << ") has tool calls; only an assistant's "
                                          << "may");
  RenderedChat r;
  std::string& out = r.text;
  r.spans.assign(messages.size(), {0, 0});
  if (family_ == Family::kLlama3) {
    for (size_t i = 0; i < messages.size(); ++i) {
      const size_t begin = out.size();
      if (i == 0) out += "<|begin_of_text|>";
      out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + trim(messages[i].content) +
             "<|eot_id|>";
      r.spans[i] = {begin, out.size()};
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return r;
  }
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (!tools.empty()) {
    out += "<|im_start|>system\n";
    if (has_system) out += messages[0].content + "\n\n";
    out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
           "function signatures within <tools></tools> XML tags:\n<tools>";
    for (const std::string& tool : tools) out += "\n" + tool;
    out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (has_system) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  } else if (!default_system_.empty()) {
    out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
  }
  if (has_system) r.spans[0] = {0, out.size()};
  // Qwen3: the thinking of assistant turns after the last user query is kept, earlier ones' dropped; a user turn
  // that only carries tool responses is not a query.
  size_t last_query = messages.empty() ? 0 : messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_reply = c.rfind("<tool_response>", 0) == 0 && c.size() >= 16 &&
                            c.compare(c.size() - 16, 16, "</tool_response>") == 0;
    if (messages[i].role == "user" && !(thinking_ && tool_reply)) {
      last_query = i;
      break;
    }
  }
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const size_t begin = out.size();
    const bool last = i + 1 == messages.size();
    if (m.role == "tool") {  // consecutive tool replies share one user turn
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    } else if (m.role != "assistant" || !thinking_) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else {
      std::string content = m.content, reasoning;
      if (contains(m.content, "</think>")) {
        content = strip_chars(after_last(m.content, "</think>"), "\n", true, false);
        reasoning = strip_chars(
            after_last(strip_chars(before_first(m.content, "</think>"), "\n", false, true), "<think>"), "\n", true,
            false);
      }
      if (i > last_query && (last || !reasoning.empty()))
        out += "<|im_start|>assistant\n<think>\n" + strip_chars(reasoning, "\n", true, true) + "\n</think>\n\n" +
               strip_chars(content, "\n", true, false);
      else
        out += "<|im_start|>assistant\n" + content;
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        if ((k == 0 && !content.empty()) || k > 0) out += "\n";
        out += "<tool_call>\n{\"name\": \"" + m.tool_calls[k].name + "\", \"arguments\": " +
               m.tool_calls[k].arguments + "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    }
    r.spans[i] = {begin, out.size()};
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (thinking_ && !enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return r;
}

}  // namespace rlcpp
