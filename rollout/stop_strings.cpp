#include "rollout/stop_strings.h"

#include <algorithm>

namespace rlcpp {

namespace {

constexpr size_t kMaxCharacterTokens = 4;  // a UTF-8 character is at most 4 bytes, so at most 4 byte tokens

}  // namespace

size_t find_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, text.find(s));
  return first;
}

size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops)
    for (size_t len = std::min(text.size(), s.size() - 1); len > hold; --len)
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  return hold;
}

size_t visible_length(const std::string& text, const std::vector<std::string>& stops, bool finished) {
  const size_t stop = find_stop(text, stops);
  if (stop != std::string::npos) return stop;
  return finished ? text.size() : text.size() - stop_holdback(text, stops);
}

bool ends_in_partial_character(const std::string& text) {
  return text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

StopStringWatch::StopStringWatch(const std::vector<std::string>& stops, const Tokenizer& tok)
    : stops_(&stops), tok_(&tok) {
  for (const std::string& s : stops) longest_ = std::max(longest_, s.size());
}

bool StopStringWatch::add(int32_t token) {
  if (token >= tok_->vocab_size()) return false;  // an id past the tokenizer's vocabulary has no text
  pending_.push_back(token);
  const std::string piece = tok_->decode(pending_);
  if (ends_in_partial_character(piece) && pending_.size() < kMaxCharacterTokens) return false;
  text_ += piece;
  pending_.clear();
  const bool stopped = find_stop(text_, *stops_) != std::string::npos;
  // A stop string not yet seen ends in a later piece: only the last longest_ - 1 bytes can be its start.
  if (text_.size() >= longest_) text_.erase(0, text_.size() - (longest_ - 1));
  return stopped;
}

}  // namespace rlcpp
