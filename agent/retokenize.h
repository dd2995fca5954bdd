// The mismatch lab's contrast to token-in/token-out (agent.tokenization = "retokenize"): what multi-turn RL
// frameworks did before TITO. Each assistant turn is decoded to text (its tool calls read out of it), the whole
// conversation re-rendered with the chat template (tools in the system turn, tool calls re-serialised by the
// template's tojson, tool replies as <tool_response> blocks) and tokenized again; the loss mask is what the
// rendered assistant messages cover. The re-rendered text can differ from what was sampled (Qwen3's template adds
// an empty think block to the last assistant turn, re-serialises JSON, drops earlier turns' reasoning), and BPE
// can split the same text into other tokens: then the trainer trains on tokens the engine never sampled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/episode.h"
#include "agent/turn_protocol.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp {

struct Retokenized {
  std::vector<int32_t> prompt;    // up to the first assistant message's content
  std::vector<int32_t> response;  // the rest
  std::vector<float> mask;        // per response token: 1 inside an assistant message (its <|im_end|> included)
  // The engine's log-probs of the sampled tokens, put on the masked tokens in order (the j-th masked token gets
  // the j-th sampled one's; 0 past them): how a framework that kept the engine's per-token log-probs beside
  // re-tokenized text lined them up.
  std::vector<float> rollout_logp;
  bool differs = false;  // prompt + response are not the episode's token ids
};

// `system`, `enable_thinking`: the run's chat options (the prompt was rendered with them).
Retokenized retokenize(const Episode& episode, const HfTokenizer& tokenizer, const TurnProtocol& protocol,
                       const std::string& system, bool enable_thinking);

}  // namespace rlcpp
