// `rlcpp serve`'s request bodies (OpenAI's /v1/completions and /v1/chat/completions, with vLLM's extra fields):
// parsed and checked before anything is queued, every refusal a ServeError naming the field. The HTTP layer
// (rollout/serve_http.h) only calls parse_completion_request and answers the error; the engine loop
// (rollout/serve_loop.h) never sees a bad request.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "tokenizer/tokenizer.h"
#include "rollout/request.h"

namespace rlcpp {

// What the server accepts; the CLI's --max-* options set them.
struct ServeLimits {
  int64_t max_body_bytes = 1 << 20;  // request body
  int64_t max_tokens = 4096;         // "max_tokens" / "max_completion_tokens" of one request
  int64_t max_n = 16;                // "n"
  int64_t max_top_logprobs = 20;     // "logprobs" (completions) / "top_logprobs" (chat)
  static constexpr int64_t kMaxConcurrency = 4096;  // each request being served holds one of the server's threads
  int64_t max_concurrency = 64;      // requests being served at once; one more is answered 429
};

// An HTTP error the server answers with: status, OpenAI's error type, the message and the field ("param") at
// fault (empty when it is the request as a whole).
class ServeError : public std::runtime_error {
 public:
  ServeError(int status, std::string param, const std::string& message)
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  // "invalid_request_error", "rate_limit_error", "server_error", "authentication_error", "not_found_error".
  const char* type() const;
  // {"error": {"message", "type", "param", "code"}}, OpenAI's shape.
  Json to_json() const;

 private:
  int status_;
  std::string param_;
};

// `j` as JSON text; a string that is not valid UTF-8 (a client's bytes, a token's partial character) is written
// with U+FFFD in place of the bad bytes instead of throwing.
std::string json_text(const Json& j);

// One parsed request: the prompt's ids, how to sample, what to return.
struct CompletionRequest {
  bool chat = false;  // /v1/chat/completions
  std::vector<int32_t> prompt;
  SamplingParams sampling;  // max_new_tokens = max_tokens; seed drawn by the server when the body has none
  bool seeded = false;      // the body gave "seed"
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // "stream_options": {"include_usage": true}: a last chunk with the usage
  int64_t top_logprobs = 0;      // alternatives per token; with `logprobs` each token's own log-prob is returned
  bool logprobs = false;
  bool return_token_ids = false;  // vLLM's: "prompt_token_ids" and each choice's "token_ids" in the response
  // "stop": a choice ends when its text contains one of these (rollout/stop_strings.h); its text is cut before it.
  std::vector<std::string> stop;
  // Chat with "tools" and "tool_choice" "auto": the reply's <tool_call> blocks become "tool_calls".
  bool parse_tool_calls = false;
  // As the body gave them, for a session to check that a request continues its conversation
  // (rollout/serve_sessions.h): completions' "prompt", chat's "messages".
  Json prompt_value, messages;
};

constexpr size_t kMaxStopStrings = 4;  // OpenAI's limit on "stop"

// Parses `body` as the endpoint's JSON: unknown fields, wrong types and out-of-range values are 400s naming the
// field; a prompt that does not fit the context (`context` tokens, one new token at least) is a 400 on
// "prompt"/"messages", a max_tokens past `limits` on "max_tokens". `model_name` must match "model" when given.
// A completions prompt's text ("text" or ["text"]); nothing for token ids.
std::optional<std::string> completion_prompt_text(const Json& prompt);

// `session`: the request is a session's turn (rollout/serve_sessions.h), whose text prompt is not encoded here
// (prompt stays empty): only the part a session adds is, there.
CompletionRequest parse_completion_request(const std::string& body, bool chat, const Tokenizer& tok,
                                           const std::string& model_name, int64_t context, int64_t vocab_size,
                                           const ServeLimits& limits, bool session = false);

}  // namespace rlcpp
