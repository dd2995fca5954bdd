#include "reward/dataset_task.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "core/config.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"
#include "core/utf8.h"
#include "reward/split_hash.h"

namespace rlcpp {
namespace {

constexpr uint64_t kEvalStream = 0x6576616c;  // "eval"

// Throws naming the first character of `text` outside `charset` (bytes compared one by one, so a multi-byte
// character is always outside a charset of ASCII characters).
void check_charset(const std::string& text, const std::string& charset, const std::string& where,
                   const char* field) {
  if (charset.empty()) return;
  for (size_t i = 0; i < text.size(); ++i) {
    if (charset.find(text[i]) != std::string::npos) continue;
    RLCPP_FAIL(where << ": " << field << " has character " << describe_character(text, i) << " at offset " << i
                     << " that the tokenizer cannot encode (task.charset \"" << charset
                     << "\"; text needs a model checkpoint with a tokenizer.json and task.charset \"\")");
  }
}

// What identifies a problem: its prompt, or its conversation's JSON.
std::string problem_key(const Problem& p) {
  const auto m = p.meta.find("messages");
  return m == p.meta.end() ? p.prompt : m->dump();
}

// {"messages": [{"role": "system" | "user" | "assistant", "content": ...}, ...], ending with a user turn (the
// model answers it); the chat template renders it when the prompt is encoded.
void check_messages(const Json& messages, const std::string& where, const std::string& charset) {
  RLCPP_CHECK(messages.is_array() && !messages.empty(),
              where << ": \"messages\" must be a non-empty list of {\"role\", \"content\"}");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string at = where + ": message " + std::to_string(i);
    RLCPP_CHECK(m.is_object() && m.size() == 2 && m.contains("role") && m.contains("content") && m["role"].is_string() &&
                    m["content"].is_string(),
                at << " must be {\"role\": string, \"content\": string}");
    const std::string role = m["role"].get<std::string>();
    RLCPP_CHECK(role == "user" || role == "assistant" || (role == "system" && i == 0),
                at << ": role \"" << role << "\" (system first, then user and assistant)");
    check_charset(m["content"].get<std::string>(), charset, at, "content");
  }
  RLCPP_CHECK(messages.back()["role"] == "user", where << ": the last message must be the user's (the model answers it)");
}

}  // namespace

std::vector<Problem> load_jsonl_problems(const std::string& path, const std::string& charset,
                                         const ScorerSpec& scorer) {
  const InputFile in(path, kDatasetInput.named("a JSONL dataset file"));
  std::vector<Problem> problems;
  std::unordered_map<std::string, std::pair<std::string, int64_t>> answer_of;  // prompt -> (answer, line)
  in.for_each_line([&](std::string_view text, int64_t line_no) {
    std::string line(text);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    std::string where = "dataset '" + path + "' line " + std::to_string(line_no);
    Json j;
    try {
      j = parse_json_limited(line);
    } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
      RLCPP_FAIL(where << ": not valid JSON (" << e.what() << ")");
    }
    RLCPP_CHECK(j.is_object(), where << ": expected an object {\"prompt\": ..., \"answer\": ...}, got " << line);
    for (auto it = j.begin(); it != j.end(); ++it) {
      RLCPP_CHECK(it.key() == "prompt" || it.key() == "messages" || it.key() == "answer" || it.key() == "meta",
                  where << ": unknown key '" << it.key() << "' (valid keys: prompt or messages, answer, meta)");
    }
    RLCPP_CHECK(j.contains("prompt") != j.contains("messages"),
                where << ": give one of \"prompt\" (text) and \"messages\" (a conversation)");
    if (j.contains("messages")) {
      check_messages(j["messages"], where, charset);
      j["prompt"] = j["messages"].back()["content"];  // the user turn the model answers
      RLCPP_CHECK(!j.contains("meta") || (j["meta"].is_object() && !j["meta"].contains("messages")),
                  where << ": \"meta\" must be an object without \"messages\"");
    }
    RLCPP_CHECK(j["prompt"].is_string(), where << ": \"prompt\" must be a string");
    RLCPP_CHECK(j.contains("answer") && j["answer"].is_string(), where << ": \"answer\" must be a string");
    RLCPP_CHECK(!j.contains("meta") || j["meta"].is_object(), where << ": \"meta\" must be an object");
    Problem p;
    p.prompt = j["prompt"].get<std::string>();
    p.answer = j["answer"].get<std::string>();
    RLCPP_CHECK(!p.prompt.empty(), where << ": \"prompt\" is empty");
    RLCPP_CHECK(!p.answer.empty(), where << ": \"answer\" is empty");
    check_charset(p.prompt, charset, where, "prompt");
    check_charset(p.answer, charset, where, "answer");
    std::string mismatch = answer_mismatch(scorer, p.answer);
    RLCPP_CHECK(mismatch.empty(), where << ": answer \"" << p.answer << "\": " << mismatch);
    p.meta = j.contains("meta") ? j["meta"] : Json::object();
    if (j.contains("messages")) p.meta["messages"] = j["messages"];
    p.meta["line"] = line_no;
    auto [it, inserted] = answer_of.try_emplace(problem_key(p), p.answer, line_no);
    RLCPP_CHECK(inserted || it->second.first == p.answer,
                where << ": prompt \"" << p.prompt << "\" has answer \"" << p.answer << "\" but line "
                      << it->second.second << " gives it \"" << it->second.first << "\"");
    p.id = fnv1a64(problem_key(p));
    problems.push_back(std::move(p));
  });
  return problems;
}

DatasetTask::DatasetTask(const std::string& path, const std::string& test_path, const std::string& charset,
                         uint64_t eval_seed, ScorerSpec scorer)
    : path_(path), test_path_(test_path), separate_test_file_(!test_path.empty()), eval_seed_(eval_seed), scorer_(scorer) {
  RLCPP_CHECK(!path.empty(), "config key 'task.path': the dataset task needs a JSONL file");
  RLCPP_CHECK(scorer.kind != ScorerKind::kNumeric || scorer.tolerance >= 0.0,
              "config key 'task.tolerance': " << scorer.tolerance << " is negative");
  scorer_.allow_negative = true;
  std::vector<Problem> all = load_jsonl_problems(path, charset, scorer_);
  if (separate_test_file_) {
    train_ = std::move(all);
    test_ = load_jsonl_problems(test_path, charset, scorer_);
    std::unordered_map<std::string, int64_t> train_line;
    for (const Problem& p : train_) train_line.emplace(problem_key(p), p.meta["line"].get<int64_t>());
    for (const Problem& p : test_) {
      auto it = train_line.find(problem_key(p));
      RLCPP_CHECK(it == train_line.end(), "dataset '" << test_path << "' line " << p.meta["line"].get<int64_t>()
                                                      << ": prompt \"" << p.prompt << "\" is also in '" << path
                                                      << "' line " << it->second
                                                      << "; train and test must be disjoint");
    }
  } else {
    for (Problem& p : all) (is_test_key(p.id) ? test_ : train_).push_back(std::move(p));
  }
  for (const Problem& p : test_) test_prompts_.insert(problem_key(p));
  RLCPP_CHECK(!train_.empty(), "dataset '" << path << "': no training problems (" << test_.size()
                                           << " problems, all in the test split)");
  RLCPP_CHECK(!test_.empty(), "dataset '" << path << "': the held-out split is empty ("
                                          << train_.size()
                                          << " problems, none hashed to test); give task.test_path");
}

Problem DatasetTask::sample_train(PhiloxStream& rng) const { return train_[rng.below(train_.size())]; }

std::vector<Problem> DatasetTask::eval_set(int64_t n) const {
  RLCPP_CHECK(n >= 0, "eval set size " << n << " is negative");
  std::vector<size_t> order(test_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  PhiloxStream rng(eval_seed_, kEvalStream);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  size_t count = std::min(order.size(), static_cast<size_t>(n));
  std::vector<Problem> out;
  for (size_t i = 0; i < count; ++i) out.push_back(test_[order[i]]);
  return out;
}

bool DatasetTask::is_test(const Problem& problem) const {
  if (separate_test_file_) return test_prompts_.count(problem_key(problem)) > 0;
  return is_test_key(fnv1a64(problem_key(problem)));
}

RewardResult DatasetTask::score(const Problem& problem, const std::string& response, bool terminated) const {
  return score_answer(scorer_, problem.answer, response, terminated);
}

int64_t DatasetTask::max_new_tokens() const {
  size_t longest = 0;
  for (const auto* split : {&train_, &test_})
    for (const Problem& p : *split) longest = std::max(longest, p.answer.size());
  return static_cast<int64_t>(longest) + 2;
}

std::string DatasetTask::alphabet() const {
  bool present[256] = {};
  for (const auto* split : {&train_, &test_})
    for (const Problem& p : *split)
      for (const std::string* s : {&p.prompt, &p.answer})
        for (char c : *s) present[static_cast<unsigned char>(c)] = true;
  std::string out;
  for (int c = 0; c < 256; ++c)
    if (present[c]) out += static_cast<char>(c);
  return out;
}

void DatasetTask::check_fits(int64_t context, int64_t max_new_tokens) const {
  for (const auto* problems : {&train_, &test_}) {
    const std::string& file = problems == &test_ && separate_test_file_ ? test_path_ : path_;
    for (const Problem& p : *problems) {
      // At most one token a byte, and BOS; a conversation's template adds a few markers per message.
      int64_t prompt_bytes = static_cast<int64_t>(p.prompt.size());
      if (const auto m = p.meta.find("messages"); m != p.meta.end()) {
        prompt_bytes = 0;
        for (const Json& message : *m) prompt_bytes += static_cast<int64_t>(message["content"].get<std::string>().size()) + 16;
      }
      const int64_t need = 1 + prompt_bytes + max_new_tokens;
      RLCPP_CHECK(need <= context, "dataset '" << file << "' line " << p.meta["line"].get<int64_t>() << ": the prompt's "
                                               << prompt_bytes << " characters + BOS + " << max_new_tokens
                                               << " new tokens need " << need << " positions, more than the model's "
                                               << "context of " << context);
    }
  }
}

}  // namespace rlcpp
