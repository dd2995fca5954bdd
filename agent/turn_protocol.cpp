#include "agent/turn_protocol.h"

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp {

std::unique_ptr<TurnProtocol> make_turn_protocol(const Tokenizer& tokenizer, bool enable_thinking,
                                                 const std::string& system) {
  if (dynamic_cast<const CharTokenizer*>(&tokenizer) != nullptr) {
    RLCPP_CHECK(system.empty(), "agent: the character tokenizer's turn protocol (w1) has no system message; "
                                "chat.system must be empty");
    return make_w1_protocol(tokenizer);
  }
  return make_chat_protocol(tokenizer, enable_thinking, system);
}

}  // namespace rlcpp
