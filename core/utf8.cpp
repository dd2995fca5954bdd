#include "core/utf8.h"

#include <cstdio>

namespace rlcpp {

namespace {

// How many bytes of a well-formed character start at `at` (0 when none does): the longest well-formed prefix
// is `*consumed` bytes long either way, so an ill-formed one is replaced by one U+FFFD per maximal subpart.
size_t well_formed_length(std::string_view s, size_t at, size_t* consumed) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[at + k]); };
  const unsigned char b0 = byte(0);
  *consumed = 1;
  if (b0 < 0x80) return 1;
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) length = 2;
  else if (b0 == 0xE0) length = 3, lo = 0xA0;
  else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) length = 3;
  else if (b0 == 0xED) length = 3, hi = 0x9F;  // no surrogates
  else if (b0 == 0xF0) length = 4, lo = 0x90;
  else if (b0 >= 0xF1 && b0 <= 0xF3) length = 4;
  else if (b0 == 0xF4) length = 4, hi = 0x8F;  // nothing past U+10FFFF
  else return 0;
  for (size_t k = 1; k < length; ++k) {
    if (at + k >= s.size()) return 0;
    const unsigned char b = byte(k);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
    *consumed = k + 1;
  }
  return length;
}

}  // namespace

std::string utf8_encode(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

std::optional<uint32_t> utf8_next(std::string_view text, size_t& at) {
  if (at >= text.size()) return std::nullopt;
  size_t consumed = 0;
  const size_t n = well_formed_length(text, at, &consumed);
  if (n == 0) return std::nullopt;
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(text[at + k])); };
  uint32_t cp = 0;
  if (n == 1) cp = b(0);
  else if (n == 2) cp = ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  else if (n == 3) cp = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  else cp = ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  at += n;
  return cp;
}

size_t utf8_valid_prefix(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    if (static_cast<unsigned char>(text[at]) < 0x80) {
      ++at;
      continue;
    }
    size_t consumed = 0;
    const size_t n = well_formed_length(text, at, &consumed);
    if (n == 0) return at;
    at += n;
  }
  return at;
}

namespace {

// `bytes` with its well-formed characters kept and each maximal ill-formed subpart given to `replace`.
template <class Replace> std::string rewrite_ill_formed(std::string_view bytes, Replace&& replace) {
  std::string out;
  out.reserve(bytes.size());
  size_t at = 0;
  while (at < bytes.size()) {
    size_t consumed = 0;
    const size_t n = well_formed_length(bytes, at, &consumed);
    if (n > 0) {
      out.append(bytes.substr(at, n));
      at += n;
    } else {
      replace(bytes.substr(at, consumed), out);
      at += consumed;
    }
  }
  return out;
}

}  // namespace

std::string utf8_lossy(std::string_view bytes) {
  return rewrite_ill_formed(bytes, [](std::string_view, std::string& out) { out += "\xEF\xBF\xBD"; });  // U+FFFD
}

std::string utf8_with_byte_escapes(std::string_view bytes) {
  return rewrite_ill_formed(bytes, [](std::string_view part, std::string& out) {
    for (const char byte : part) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "<0x%02X>", static_cast<unsigned char>(byte));
      out += escape;
    }
  });
}

}  // namespace rlcpp
