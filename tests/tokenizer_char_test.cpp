#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tests/error_test_support.h"

namespace rlcpp {
namespace {

TEST(CharTokenizer, IdsFollowBenchmarksThenCountdownCharacters) {
  CharTokenizer tok;
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.vocab_size(), 32);
  EXPECT_EQ(tok.charset(), "0123456789+-*= ()/");
  EXPECT_EQ(char_tokenizer_charset(), tok.charset());
  EXPECT_EQ(tok.encode("0123456789+-*= "),
            (std::vector<int32_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(tok.encode("()/"), (std::vector<int32_t>{18, 19, 20}));
}

TEST(CharTokenizer, EncodeDecodeRoundTrips) {
  CharTokenizer tok;
  for (std::string s : {"", "12+34=", "46", "999*999=998001", "(25-5)/4 = 5", "0123456789+-*= ()/"})
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
}

TEST(CharTokenizer, EncodeAddsNoSpecialTokens) {
  CharTokenizer tok;
  EXPECT_EQ(tok.encode("7=").size(), 2u);
}

TEST(CharTokenizer, UnknownCharacterErrorNamesCharacterCodePointAndByte) {
  CharTokenizer tok;
  std::string e = error_of([&] { tok.encode("12+a4="); });
  EXPECT_NE(e.find("character 'a' (U+0061) at byte 3"), std::string::npos) << e;
  EXPECT_NE(e.find("\"12+a4=\""), std::string::npos) << e;
  e = error_of([&] { tok.encode(std::string("1\n")); });
  EXPECT_NE(e.find("character '\\n' (U+000A) at byte 1"), std::string::npos) << e;
  // A character of several bytes is named whole, not by its first byte (issue 32, F17).
  e = error_of([&] { tok.encode("1+\u00e9="); });
  EXPECT_NE(e.find("character '\u00e9' (U+00E9) at byte 2 of \"1+\u00e9=\""), std::string::npos) << e;
  e = error_of([&] { tok.encode("1+\xff="); });
  EXPECT_NE(e.find("character byte 0xFF at byte 2"), std::string::npos) << e;
  EXPECT_TRUE(tok.can_encode('7'));
  EXPECT_TRUE(tok.can_encode('/'));
  EXPECT_FALSE(tok.can_encode('a'));
  EXPECT_FALSE(tok.can_encode('\0'));
  EXPECT_FALSE(tok.can_encode(static_cast<char>(0xe9)));
}

TEST(CharTokenizer, DecodeSkipsSpecialIdsAndMarksUnusedIds) {
  CharTokenizer tok;
  EXPECT_EQ(tok.decode({1, 4, 5, 2, 0, 6}), "123");  // does not stop at EOS
  EXPECT_EQ(tok.decode({4, 21, 31, 20}), "1?" "?/");
}

TEST(CharTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  CharTokenizer tok;
  std::string e = error_of([&] { tok.decode({3, 32}); });
  EXPECT_NE(e.find("id 32 at index 1"), std::string::npos) << e;
  e = error_of([&] { tok.decode({-1}); });
  EXPECT_NE(e.find("id -1 at index 0"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlcpp
