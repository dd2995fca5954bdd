// `rlcpp serve`'s "stop" strings: a choice ends when its decoded text contains one, and its text is cut before it.
// The engine loop watches each choice's text as tokens arrive (StopStringWatch: decoded incrementally, a token
// that ends inside a UTF-8 character waits for the next); the response builder cuts the text it returns and, when
// streaming, holds back the end of the text that a stop string could still swallow (visible_length).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rlcpp {

// Where the earliest stop string begins in `text`; std::string::npos when none is in it.
size_t find_stop(const std::string& text, const std::vector<std::string>& stops);
// The longest suffix of `text` that is the start of a stop string (but not all of it): the bytes a stream must not
// send yet, since the next token may complete the stop string.
size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops);
// How much of `text` a client may see: cut before a stop string; while the choice is going on, also without the
// hold-back.
size_t visible_length(const std::string& text, const std::vector<std::string>& stops, bool finished);

// Text that ends inside a UTF-8 character decodes to U+FFFD at its end.
bool ends_in_partial_character(const std::string& text);

// One choice's text as its tokens arrive, and whether it has reached a stop string.
class StopStringWatch {
 public:
  StopStringWatch(const std::vector<std::string>& stops, const Tokenizer& tok);
  // Adds a sampled token; true when the text so far contains a stop string (the choice ends at this token).
  bool add(int32_t token);

 private:
  const std::vector<std::string>* stops_;
  const Tokenizer* tok_;
  size_t longest_ = 0;           // the longest stop string's bytes
  std::string text_;              // the end of the decoded text before pending_ (a stop string's length less one)
  std::vector<int32_t> pending_;  // tokens whose text ends inside a UTF-8 character, waiting for the rest
};

}  // namespace rlcpp
