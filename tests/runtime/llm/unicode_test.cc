// UTF-8 validation and lossy repair, character classes and NFC (against HF's NFC: tests/data/llm/nfc.jsonl).
// is_numeric_char is checked against HF's Digits in pre_tokenizer_test.cc and scripts/gen_unicode_tables.py.
#include "runtime/llm/unicode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::llm {
namespace {

const uint8_t* bytes_of(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

std::string repair(const std::string& in) {
  Utf8Tail tail;
  std::string out(3 * in.size() + 3, '\0');
  size_t written = 0;
  uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
  EXPECT_TRUE(append_lossy_utf8(tail, bytes_of(in), in.size(), dst, out.size(), &written));
  EXPECT_TRUE(flush_lossy_utf8(tail, dst, out.size(), &written));
  out.resize(written);
  return out;
}

TEST(Utf8Test, FindsTheFirstIllFormedByte) {
  EXPECT_EQ(find_invalid_utf8(bytes_of("abc"), 3), 3u);
  const std::string ok = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";
  EXPECT_EQ(find_invalid_utf8(bytes_of(ok), ok.size()), ok.size());
  const std::vector<std::pair<std::string, size_t>> bad = {
      {"a\x80", 1},          {"ab\xC0\xAF", 2},      {"\xC1\xBF", 0},       {"\xE0\x80\xAF", 0},
      {"x\xED\xA0\x80", 1},  {"\xF0\x8F\xBF\xBF", 0}, {"\xF4\x90\x80\x80", 0}, {"\xF5\x80\x80\x80", 0},
      {"abc\xE4\xBD", 3},    {"\xC3", 0},            {"\xE4\xBDx", 0},      {"\xFF", 0},
  };
  for (const auto& [s, at] : bad) EXPECT_EQ(find_invalid_utf8(bytes_of(s), s.size()), at) << testing::escaped(s.substr(0, at));
}

TEST(Utf8Test, ValidatorTellsPrefixesFromIllFormedRuns) {
  struct Case {
    std::string bytes;
    bool prefix;
    bool complete;
  };
  const Case cases[] = {
      {"", true, true},
      {"a\xC3\xA9", true, true},
      {"\xE4\xBD", true, false},       // unfinished, not ill-formed
      {"\xF0\x9F\x98", true, false},
      {"\xE4\xBD\xA0\x80", false, false},  // a continuation byte after a complete character
      {"\xE0\x80", false, false},     // overlong: E0 needs A0..BF next
      {"\xED\xA0", false, false},     // a surrogate
      {"\xF4\x90", false, false},     // above U+10FFFF
      {"\xC3" "a", false, false},
      {"\xFF", false, false},
      {"\xC3\xA9\xC1", false, false},  // C1 never starts a sequence
  };
  for (const Case& c : cases) {
    Utf8Validator v;
    for (char b : c.bytes) v.push(static_cast<uint8_t>(b));
    EXPECT_EQ(v.is_prefix(), c.prefix) << testing::escaped(c.bytes);
    EXPECT_EQ(v.is_complete(), c.complete) << testing::escaped(c.bytes);
  }
}

TEST(Utf8Test, LossyRepairReplacesMaximalSubparts) {
  // Unicode §3.9 (Tables 3-8 ff.); the expected strings are Python's bytes.decode('utf-8', 'replace'),
  // which follows the same practice as Rust's from_utf8_lossy.
  EXPECT_EQ(repair("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\uFFFD\uFFFD\uFFFD" "b\uFFFD" "c\uFFFD\uFFFD" "d");
  EXPECT_EQ(repair("\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41"), "\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD" "A");
  EXPECT_EQ(repair("\xED\xA0\x80\xED\xBF\xBF\xED\xAF\x41"), "\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD" "A");
  EXPECT_EQ(repair("\xF4\x91\x92\x93\xFF\x41\x80\xBF\x42"), "\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD" "A\uFFFD\uFFFD" "B");
  EXPECT_EQ(repair("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"), "\uFFFD\uFFFD\uFFFD\uFFFD" "A");
  EXPECT_EQ(repair("ok \xF0\x9F\x98"), "ok \uFFFD");  // truncated at the end: one U+FFFD
  EXPECT_EQ(repair("\xF0\x9F\x98\x80"), "\U0001F600");
}

TEST(Utf8Test, LossyRepairHoldsBackAnIncompleteTail) {
  Utf8Tail tail;
  uint8_t out[16];
  size_t written = 0;
  const std::string emoji = "\xF0\x9F\x98\x80";
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(append_lossy_utf8(tail, bytes_of(emoji) + i, 1, out, sizeof(out), &written));
    EXPECT_EQ(written, 0u);
    EXPECT_EQ(tail.size, i + 1);
  }
  ASSERT_TRUE(append_lossy_utf8(tail, bytes_of(emoji) + 3, 1, out, sizeof(out), &written));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(out), written), emoji);
  EXPECT_EQ(tail.size, 0u);
  // Too small an output: reported, never overrun.
  Utf8Tail t2;
  written = 0;
  EXPECT_FALSE(append_lossy_utf8(t2, bytes_of("\xFF\xFF"), 2, out, 4, &written));
}

TEST(UnicodeTest, CharacterClassesFollowUnicode16AndWhiteSpace) {
  EXPECT_EQ(char_class('a'), kClassLetter);
  EXPECT_EQ(char_class('7'), kClassNumber);
  EXPECT_EQ(char_class(' '), kClassWhiteSpace);
  EXPECT_EQ(char_class('!'), 0);
  EXPECT_EQ(char_class(0x00E9), kClassLetter);    // é
  EXPECT_EQ(char_class(0x00BD), kClassNumber);    // ½ (No)
  EXPECT_EQ(char_class(0x2164), kClassNumber);    // Ⅴ (Nl)
  EXPECT_EQ(char_class(0x4F60), kClassLetter);    // 你
  EXPECT_EQ(char_class(0x0301), 0);               // combining acute (Mn) is not a letter
  EXPECT_EQ(char_class(0x3000), kClassWhiteSpace);
  EXPECT_EQ(char_class(0x0085), kClassWhiteSpace);
  EXPECT_EQ(char_class(0x001C), 0);               // Python isspace() says yes; White_Space says no
  EXPECT_EQ(char_class(0x200B), 0);
  EXPECT_EQ(char_class(0x11F04), kClassLetter);   // Kawi (Unicode 15.0)
  EXPECT_EQ(char_class(0x1E5D0), kClassLetter);   // Ol Onal (Unicode 16.0)
  EXPECT_EQ(char_class(0x10940), 0);              // Sidetic (Unicode 17.0): unassigned for onig 16.0
  EXPECT_EQ(char_class(0x1D2C0), kClassNumber);   // Kaktovik numeral (15.0)
  EXPECT_EQ(char_class(0x10FFFF), 0);
}

TEST(UnicodeTest, NfcMatchesHuggingFace) {
  const std::vector<nlohmann::json> lines = testing::read_jsonl(testing::data_path("nfc.jsonl"));
  ASSERT_GT(lines.size(), 3000u);
  size_t failures = 0, changed = 0;
  for (const nlohmann::json& c : lines) {
    const std::string text = c["text"].get<std::string>();
    const std::string expect = c.value("nfc", text);
    changed += expect != text;
    std::vector<uint8_t> out(kNfcMaxExpansion * text.size() + 1);
    std::vector<uint32_t> work(nfc_work_count(text.size()) + 1);
    const size_t n = normalize_nfc(bytes_of(text), text.size(), out.data(), work.data());
    const std::string got(reinterpret_cast<char*>(out.data()), n);
    if (got != expect && ++failures <= 20) {
      ADD_FAILURE() << "NFC(" << testing::escaped(text) << ") = " << testing::escaped(got) << ", HF "
                    << testing::escaped(expect);
    }
    if (is_nfc_quick(bytes_of(text), text.size())) {
      EXPECT_EQ(expect, text);
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(changed, 1000u);
}

TEST(UnicodeTest, NfcOfLongRunsOfMarksIsSortedStably) {
  // 10,000 marks of alternating classes 230 / 220 after one base: the counting-sort path.
  std::string text = "a";
  for (int i = 0; i < 5000; ++i) text += "\u0301\u0316";
  std::vector<uint8_t> out(kNfcMaxExpansion * text.size());
  std::vector<uint32_t> work(nfc_work_count(text.size()));
  const size_t n = normalize_nfc(bytes_of(text), text.size(), out.data(), work.data());
  std::string expect = "\u00E1";  // a + U+0301 composes across the lower-class U+0316 run
  for (int i = 0; i < 5000; ++i) expect += "\u0316";
  for (int i = 0; i < 4999; ++i) expect += "\u0301";
  EXPECT_EQ(std::string(reinterpret_cast<char*>(out.data()), n), expect);
}

}  // namespace
}  // namespace ember::llm
