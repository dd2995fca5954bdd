// How an episode's turns are written in tokens, in the model's own format (agent/README.md "Turn protocols"):
// the prompt's tokens, the tokens that end an assistant turn, how a sampled turn is read (its text, its tool
// calls), and the tokens an environment's step appends (closing a turn the limit cut, the observation, the next
// assistant turn's header). The episode runner appends exactly these tokens; the trainer trains on them as they
// are.
//
//   w1    the character tokenizer (W1, rlcpp's toy model): ids the charset leaves unused mark calls and
//         observations:  <call> ARGUMENT </call>  ends a turn with a call to the environment's one tool
//         (ARGUMENT is its first required argument, in the charset); a turn without one ends with EOS;
//         an observation is  <obs> TEXT </obs>  (TEXT in the charset), or <obs> <error> </obs> for a failed call.
//   chat  a tokenizer.json with Qwen3's chat template: the tools listed in the system turn, a call as
//         <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> in the assistant's turn, which <|im_end|>
//         ends; a tool's reply as a user turn of <tool_response> blocks, another observation as a user turn;
//         then the next assistant header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/environment.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rlcpp {

// W1's markers: ids 21..25, which the character tokenizer leaves unused (tokenizer/tokenizer.h).
constexpr int32_t kW1CallOpen = 21, kW1CallClose = 22, kW1ObsOpen = 23, kW1ObsClose = 24, kW1ObsError = 25;

class TurnProtocol {
 public:
  virtual ~TurnProtocol() = default;
  virtual std::string name() const = 0;
  // The prompt: the first observation's text, with the tools listed where the format lists them.
  virtual std::vector<int32_t> prompt_tokens(const std::string& text, const std::vector<ToolSpec>& tools) const = 0;
  // Tokens that end an assistant turn besides the model's EOS.
  virtual std::vector<int64_t> stop_tokens() const = 0;
  // Reads a sampled turn (the token that ended it included); `ended`: false when a limit cut it.
  virtual AssistantTurn parse(const std::vector<int32_t>& turn, bool ended, const std::vector<ToolSpec>& tools) const = 0;
  // The tokens appended after `turn` for the environment's `step`, up to the next assistant turn's first token.
  virtual std::vector<int32_t> observation_tokens(const std::vector<int32_t>& turn, const EnvStep& step) const = 0;
  // The tokens as a person reads them (samples.jsonl, reports): w1's markers as <call>, </call>, <obs>, </obs>,
  // <error>, EOS as <eos>; a chat's text with its special tokens.
  virtual std::string display(const std::vector<int32_t>& tokens) const = 0;
  // The tokens of an expert's turn (demonstrations for the SFT warm start), as the model would sample them.
  virtual std::vector<int32_t> render_turn(const AssistantTurn& turn, const std::vector<ToolSpec>& tools) const = 0;
};

// The two protocols (agent/w1_protocol.cpp, agent/chat_protocol.cpp).
std::unique_ptr<TurnProtocol> make_w1_protocol(const Tokenizer& tokenizer);
std::unique_ptr<TurnProtocol> make_chat_protocol(const Tokenizer& tokenizer, bool enable_thinking,
                                                 const std::string& system);

// "w1" for the character tokenizer, "chat" for a tokenizer.json with a chat template that supports tools;
// errors name agent.protocol and what the tokenizer lacks. `enable_thinking`: the chat's generation prompts.
std::unique_ptr<TurnProtocol> make_turn_protocol(const Tokenizer& tokenizer, bool enable_thinking = true,
                                                 const std::string& system = "");

}  // namespace rlcpp
