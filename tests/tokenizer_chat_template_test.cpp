// Chat templates against `transformers`' apply_chat_template (tests/tokenizer_reference.py chat, in .venv): the
// Qwen3 template of tests/data/qwen3 (thinking kept or dropped by turn, enable_thinking = false), a Qwen2.5-style
// one (its default system message) and Llama-3's, on the same conversations; unknown templates and malformed
// messages are errors naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tool_calls.h"
#include "tests/error_test_support.h"
#include "tests/python_env.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

const std::string kSource = test_source_dir();
const std::string kReference = kSource + "/tests/tokenizer_reference.py";
const std::string kCorpus = kSource + "/tests/data/tokenizer_corpus.jsonl";

fs::path scratch_dir() {
  const fs::path dir = fs::temp_directory_path() / ("rlcpp_chat_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

const Json kCases = Json::parse(R"([
  {"messages": [{"role": "user", "content": "What is 2+2?"}], "add_generation_prompt": true},
  {"messages": [{"role": "user", "content": "What is 2+2?"}], "add_generation_prompt": true, "enable_thinking": false},
  {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "  Hi  "}],
   "add_generation_prompt": true},
  {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "<think>\nreason one\n</think>\n\nanswer one"},
                {"role": "user", "content": "q2"},
                {"role": "assistant", "content": "<think>reason two</think>answer two"}],
   "add_generation_prompt": false},
  {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "plain answer"},
                {"role": "assistant", "content": "second\n\n"}], "add_generation_prompt": false},
  {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "多语言 🙂\r\n"}], "add_generation_prompt": true},
  {"messages": [{"role": "system", "content": "\n sys \n"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "x</think>\n\ny"}], "add_generation_prompt": false}
])");

void expect_same_as_transformers(const std::string& tokenizer_dir, const std::string& tokenizer_config) {
  const fs::path cases = scratch_dir() / "cases.json", out = scratch_dir() / "rendered.json";
  std::ofstream(cases) << kCases.dump();
  ASSERT_TRUE(run_venv_python("'" + kReference + "' chat '" + tokenizer_dir + "' '" + cases.string() + "' '" +
                              out.string() + "'"));
  const Json want = Json::parse(std::ifstream(out));
  const std::optional<ChatTemplate> tmpl = ChatTemplate::of_tokenizer(tokenizer_config);
  ASSERT_TRUE(tmpl.has_value());
  for (size_t i = 0; i < kCases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + kCases[i].dump());
    const bool thinking = kCases[i].value("enable_thinking", true);
    EXPECT_EQ(tmpl->apply(chat_messages_from_json(kCases[i]["messages"], "case"),
                          kCases[i]["add_generation_prompt"].get<bool>(), thinking),
              want[i].get<std::string>());
  }
}

TEST(ChatTemplate, Qwen3FixtureRendersAsTransformersDoes) {
  const std::string dir = qwen3_fixture_dir();
  ASSERT_TRUE(fs::exists(dir + "/tokenizer_config.json")) << dir << " is missing";
  EXPECT_EQ(ChatTemplate::of_tokenizer(dir)->family(), ChatTemplate::Family::kChatML);
  expect_same_as_transformers(dir, dir + "/tokenizer.json");
}

// A trained tokenizer.json with a template of the family written beside it.
std::string tokenizer_with_template(const std::string& make, const std::string& name) {
  const fs::path dir = scratch_dir() / name;
  EXPECT_TRUE(run_venv_python("'" + kReference + "' " + make + " '" + kCorpus + "' '" + dir.string() + "'"));
  EXPECT_TRUE(run_venv_python("'" + kReference + "' set-template '" + dir.string() + "' " + name));
  return dir.string();
}

// Tools in the system turn, an assistant's tool calls and the tools' replies, as Qwen3's template writes them
// (keys in the order given: `tojson` keeps it), with spans that cut the text at message boundaries.
TEST(ChatTemplate, Qwen3FixtureRendersToolsAsTransformersDoes) {
  const std::string dir = qwen3_fixture_dir();
  using Ordered = nlohmann::ordered_json;
  const Ordered tool = Ordered::parse(R"({"type": "function", "function": {"name": "calculator",
      "description": "Évalue une expression.", "parameters": {"type": "object",
      "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}})");
  const Ordered call_args = Ordered::parse(R"({"expression": "12*34", "note": "a \"quoted\" line\n"})");
  std::string text = R"([
    {"messages": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "12*34?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": ARGS}}]},
                  {"role": "tool", "content": "408"},
                  {"role": "assistant", "content": "<think>\nsure\n</think>\n\nIt is 408.",
                   "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": ARGS}},
                                  {"type": "function", "function": {"name": "calculator", "arguments": ARGS}}]},
                  {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}],
     "add_generation_prompt": true, "tools": [TOOL]},
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a",
                   "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": ARGS}}]},
                  {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
                  {"role": "assistant", "content": "done"}],
     "add_generation_prompt": false, "tools": [TOOL, TOOL]}
  ])";
  for (const auto& [key, value] : {std::pair<std::string, Ordered>{"ARGS", call_args}, {"TOOL", tool}})
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at))
      text.replace(at, key.size(), value.dump());
  const Ordered rendered_cases = Ordered::parse(text);
  const fs::path cases_file = scratch_dir() / "tool_cases.json", out = scratch_dir() / "tool_rendered.json";
  std::ofstream(cases_file) << rendered_cases.dump();
  ASSERT_TRUE(run_venv_python("'" + kReference + "' chat '" + dir + "' '" + cases_file.string() + "' '" +
                              out.string() + "'"));
  const Json want = Json::parse(std::ifstream(out));
  const ChatTemplate tmpl = *ChatTemplate::of_tokenizer(dir);
  ASSERT_TRUE(tmpl.supports_tools());
  for (size_t i = 0; i < rendered_cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    std::vector<ChatMessage> messages;
    for (const Ordered& m : rendered_cases[i]["messages"]) {
      ChatMessage cm{m["role"].get<std::string>(), m["content"].get<std::string>(), {}};
      if (m.contains("tool_calls"))
        for (const Ordered& c : m["tool_calls"])
          cm.tool_calls.push_back({c["function"]["name"].get<std::string>(), template_tojson(c["function"]["arguments"])});
      messages.push_back(std::move(cm));
    }
    std::vector<std::string> tools;
    for (const Ordered& t : rendered_cases[i]["tools"]) tools.push_back(template_tojson(t));
    const RenderedChat r = tmpl.render(messages, rendered_cases[i]["add_generation_prompt"].get<bool>(), true, tools);
    EXPECT_EQ(r.text, want[i].get<std::string>());
    // The spans tile the text from the first message to the last (the generation prompt after them).
    ASSERT_EQ(r.spans.size(), messages.size());
    for (size_t k = 1; k < r.spans.size(); ++k) EXPECT_EQ(r.spans[k].first, r.spans[k - 1].second) << "message " << k;
    EXPECT_EQ(r.text.compare(r.spans.back().second, std::string::npos,
                             rendered_cases[i]["add_generation_prompt"].get<bool>() ? "<|im_start|>assistant\n" : ""),
              0);
  }
  EXPECT_EQ(template_tojson(call_args), R"({"expression": "12*34", "note": "a \"quoted\" line\n"})");
}

TEST(ChatTemplate, Qwen25StyleTemplateAddsItsDefaultSystemMessage) {
  const std::string dir = tokenizer_with_template("make-gpt2", "qwen25");
  const auto found = ChatTemplate::of_tokenizer(dir);
  ASSERT_TRUE(found.has_value()) << dir << " holds no chat template";
  const ChatTemplate& t = *found;
  EXPECT_EQ(t.apply({{"user", "hi"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  expect_same_as_transformers(dir, dir);
}

TEST(ChatTemplate, Llama3TemplateRendersAsTransformersDoes) {
  const std::string dir = tokenizer_with_template("make-llama3", "llama3");
  EXPECT_EQ(ChatTemplate::of_tokenizer(dir)->family(), ChatTemplate::Family::kLlama3);
  expect_same_as_transformers(dir, dir);
}

TEST(ChatTemplate, UnknownTemplatesAndBadMessagesAreErrors) {
  expect_error([] { ChatTemplate::recognise("{% for m in messages %}[INST] {{ m.content }}{% endfor %}", "cfg.json"); },
               {"cfg.json: chat_template is not one rlcpp knows", "ChatML", "Llama-3"});
  expect_error(
      [] { ChatTemplate::recognise("<|start_header_id|>...<|eot_id|> Cutting Knowledge Date: Dec 2023", "c.json"); },
      {"c.json: a Llama-3.1+ chat template"});
  expect_error([] { chat_messages_from_json(Json::parse(R"([{"role": "robot", "content": "x"}])"), "d.jsonl:3"); },
               {"d.jsonl:3: message 0: role \"robot\""});
  expect_error([] { chat_messages_from_json(Json::parse(R"([{"role": "user", "content": "x", "tool_calls": []}])"), "e"); },
               {"e: message 0: unknown key \"tool_calls\""});
  expect_error([] { chat_messages_from_json(Json::parse(R"([{"role": "user"}])"), "d.jsonl:4"); },
               {"d.jsonl:4: message 0 must be {\"role\": string, \"content\": string}"});
  expect_error([] { chat_messages_from_json(Json::parse(R"([])"), "d.jsonl:5"); }, {"non-empty list"});
  expect_error(
      [] {
        chat_messages_from_json(Json::parse(R"([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])"),
                                "d.jsonl:6");
      },
      {"message 1: a system message must come first"});
  EXPECT_FALSE(ChatTemplate::of_tokenizer(scratch_dir().string()).has_value());  // no tokenizer_config.json
  const ChatTemplate llama = ChatTemplate::recognise("<|start_header_id|>x<|end_header_id|><|eot_id|>", "t");
  expect_error([&] { llama.render({{"user", "q", {}}}, true, true, {"{}"}); }, {"Qwen3's template only"});
}

// OpenAI's chat messages (what `rlcpp serve` receives): an assistant's tool_calls with "arguments" as a JSON string
// (written as given) and content null, a tool message with its tool_call_id.
TEST(ChatTemplate, OpenAiToolCallsAndToolMessagesAreRead) {
  const std::vector<ChatMessage> m = chat_messages_from_json(Json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}])"), "req");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].content, "");
  ASSERT_EQ(m[1].tool_calls.size(), 1u);
  EXPECT_EQ(m[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(m[1].tool_calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(m[2].role, "tool");
  EXPECT_EQ(m[2].content, "18C");
  expect_error([] { chat_messages_from_json(Json::parse(R"([{"role": "assistant", "content": null,
      "tool_calls": [{"type": "function", "function": {"name": "f"}}]}])"), "req"); },
               {"req: message 0: tool call 0 must be"});
}

// parse_tool_calls is the template's inverse: the blocks Qwen3's template writes read back into calls, the text
// outside them kept; a malformed or unclosed block stays in the text, with the first problem named.
TEST(ToolCalls, TheTemplatesBlocksReadBackAndMalformedOnesStayInTheText) {
  const ToolCallText ok = parse_tool_calls(
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>");
  EXPECT_TRUE(ok.error.empty()) << ok.error;
  EXPECT_EQ(ok.text, "Let me look.");
  ASSERT_EQ(ok.calls.size(), 2u);
  EXPECT_EQ(ok.calls[0].name, "get_weather");
  EXPECT_EQ(template_tojson(ok.calls[0].arguments), R"({"city": "Paris", "days": 2})");  // keys in written order
  EXPECT_EQ(ok.calls[1].name, "now");
  EXPECT_TRUE(ok.calls[1].arguments.is_object());  // arguments written as a JSON string, parsed
  const std::string bad_json = "<tool_call>\n{\"name\": get}\n</tool_call>";
  const ToolCallText bad = parse_tool_calls("x " + bad_json);
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.text, "x " + bad_json);
  EXPECT_NE(bad.error.find("not JSON"), std::string::npos) << bad.error;
  const ToolCallText unclosed = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}");
  EXPECT_TRUE(unclosed.calls.empty());
  EXPECT_EQ(unclosed.text, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}");
  EXPECT_NE(unclosed.error.find("without its </tool_call>"), std::string::npos) << unclosed.error;
  const ToolCallText no_name = parse_tool_calls("<tool_call>{\"arguments\": {}}</tool_call>");
  EXPECT_TRUE(no_name.calls.empty());
  EXPECT_NE(no_name.error.find("must be {\"name\""), std::string::npos) << no_name.error;
}

}  // namespace
}  // namespace rlcpp
