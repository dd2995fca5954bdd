// UTF-8 as text from outside arrives: checked, decoded one code point at a time, and repaired the way Rust's
// String::from_utf8_lossy (and so Hugging Face `tokenizers`) repairs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rlcpp {

// The UTF-8 bytes of code point `cp` (< 0x110000).
std::string utf8_encode(uint32_t cp);
// The code point starting at byte `at`, advancing `at` past it; none (and `at` unchanged) when the bytes there
// are not a well-formed character (overlong forms, surrogates and truncated sequences included).
std::optional<uint32_t> utf8_next(std::string_view text, size_t& at);
// The length of the longest prefix of `text` that is well-formed UTF-8: text.size() when all of it is.
size_t utf8_valid_prefix(std::string_view text);
// `bytes` with each maximal ill-formed subsequence replaced by U+FFFD (Unicode's "substitution of maximal
// subparts", what from_utf8_lossy does).
std::string utf8_lossy(std::string_view bytes);
// `bytes` for a reader: its well-formed characters as they are, and each byte of an ill-formed stretch as
// "<0xNN>" (upper-case hex), so nothing is lost and nothing is guessed (a token that holds part of a
// character: "<0xE4><0xB8>").
std::string utf8_with_byte_escapes(std::string_view bytes);

}  // namespace rlcpp
