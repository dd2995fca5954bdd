// `rlcpp serve`'s response bodies in OpenAI's shapes (with vLLM's "prompt_token_ids" / "token_ids" when the
// request asks for them): a whole completion, or the SSE chunks of a streamed one. Pure formatting: the HTTP
// layer feeds it a job's tokens as ServeJob::wait returns them. Text is cut before a stop string; a chat with
// tools has its <tool_call> blocks read back (tokenizer/tool_calls.h) into "tool_calls", "finish_reason"
// "tool_calls" then. Streamed, the content deltas stop at the first <tool_call> and the last chunk carries the
// calls (and any text after them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tool_calls.h"
#include "rollout/serve_loop.h"

namespace rlcpp {

// The text of sampled `ids` as a response carries it (ids past the tokenizer's vocabulary have none).
std::string response_text(const Tokenizer& tok, const std::vector<int32_t>& ids);

// One request's choices as they grow: tokens, log-probs and text, and what a stream has already sent.
class CompletionBuilder {
 public:
  CompletionBuilder(const CompletionRequest& request, const Tokenizer& tok, std::string id, std::string model,
                    int64_t created);

  // Adds a wait's tokens and finished choices; returns the SSE events ("data: {...}\n\n") they make when
  // streaming: each choice's new text (held back while it ends inside a UTF-8 character) and its end.
  std::string add(const JobUpdate& update);
  // The last SSE events of a stream: usage when asked ("stream_options": {"include_usage": true}), [DONE].
  std::string stream_end(bool include_usage) const;
  // The whole response of a request that did not stream.
  Json response() const;

 private:
  struct Choice {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<std::vector<TokenLogprob>> top;
    std::string sent;  // text a stream has sent
    bool finished = false;
    FinishReason reason = FinishReason::kLength;
    size_t logprobs_sent = 0;
  };
  std::string decode(const std::vector<int32_t>& ids) const;
  // The choice's text, cut before a stop string.
  std::string text(const Choice& c) const;
  // What a stream may have sent of it by now: not a partial UTF-8 character, nothing a stop string could still
  // swallow, and with tools nothing from the first <tool_call> on until the choice has finished.
  std::string streamable_text(const Choice& c) const;
  // OpenAI's [{"index", "id", "type": "function", "function": {"name", "arguments": JSON text}}].
  Json tool_calls_json(const std::vector<ParsedToolCall>& calls, size_t choice) const;
  // "tool_calls" when the text held calls, else openai_finish_reason.
  static const char* finish_reason(const Choice& c, bool called);
  Json logprobs_json(const Choice& c, size_t from, size_t to) const;
  Json usage() const;
  Json chunk(Json choices) const;

  const CompletionRequest& request_;
  const Tokenizer& tok_;
  std::string id_, model_;
  int64_t created_;
  std::vector<Choice> choices_;
  bool role_sent_ = false;
};

const char* openai_finish_reason(FinishReason reason);  // "stop" (EOS, a stop token) or "length"

}  // namespace rlcpp
