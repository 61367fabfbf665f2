// The hand-written regexes against HF's own pre-tokenizers (Oniguruma, and Digits before GPT-2's
// regex): tests/data/llm/pretokenize.jsonl; the SentencePiece splits by hand.
#include "runtime/llm/pre_tokenizer.h"

#include <gtest/gtest.h>

#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::llm {
namespace {

std::vector<size_t> piece_ends(PreTokenizerKind kind, const std::string& text) {
  std::vector<size_t> ends;
  PreTokenCursor cursor(kind, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  size_t expect_begin = 0;
  for (size_t begin = 0, end = 0; cursor.next(&begin, &end);) {
    if (begin != expect_begin || end <= begin || end > text.size()) {
      ADD_FAILURE() << "pieces do not tile the text at " << expect_begin << ": [" << begin << ", " << end << ")";
      break;
    }
    ends.push_back(end);
    expect_begin = end;
  }
  return ends;
}

std::string pieces(const std::string& text, const std::vector<size_t>& ends) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end : ends) {
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return nlohmann::json(out).dump();
}

TEST(PreTokenizerTest, MatchesHuggingFaceOnEveryGoldenString) {
  const std::vector<nlohmann::json> lines = testing::read_jsonl(testing::data_path("pretokenize.jsonl"));
  ASSERT_GE(lines.size(), 1000u);
  const std::pair<const char*, PreTokenizerKind> kinds[] = {
      {"llama3", PreTokenizerKind::Llama3},
      {"qwen2", PreTokenizerKind::Qwen2},
      {"gpt2", PreTokenizerKind::Gpt2},
      {"gpt2_digits", PreTokenizerKind::Gpt2Digits}};
  size_t failures = 0;
  for (const nlohmann::json& c : lines) {
    const std::string text = c["text"].get<std::string>();
    for (const auto& [name, kind] : kinds) {
      const std::vector<size_t> expect = c[name].get<std::vector<size_t>>();
      const std::vector<size_t> got = piece_ends(kind, text);
      if (got != expect && ++failures <= 20) {
        ADD_FAILURE() << name << " " << testing::escaped(text) << ": " << pieces(text, got) << ", HF "
                      << pieces(text, expect);
      }
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST(PreTokenizerTest, ReproducesTheRegexCornerCases) {
  using K = PreTokenizerKind;
  using json = nlohmann::json;
  auto split = [](K kind, const std::string& text) { return pieces(text, piece_ends(kind, text)); };
  // \s+(?!\S) leaves the last space of a run to prefix the next word.
  EXPECT_EQ(split(K::Llama3, "a   b"), R"(["a","  "," b"])");
  EXPECT_EQ(split(K::Llama3, "a   "), R"(["a","   "])");
  // \s*[\r\n]+ ends after the run's last newline.
  EXPECT_EQ(split(K::Llama3, "a \n \n  b"), R"(["a"," \n \n"," "," b"])");
  // Case-insensitive contractions, and 's wins over a longer word.
  EXPECT_EQ(split(K::Llama3, "I'M 'sa"), R"(["I","'M"," '","sa"])");
  EXPECT_EQ(split(K::Gpt2, "I'M 'sa"), R"(["I","'","M"," '","sa"])");
  // \p{N}{1,3} vs \p{N} vs GPT-2's ' ?\p{N}+'.
  EXPECT_EQ(split(K::Llama3, "1234567"), R"(["123","456","7"])");
  EXPECT_EQ(split(K::Qwen2, "123"), R"(["1","2","3"])");
  EXPECT_EQ(split(K::Gpt2, "a 1234"), R"(["a"," 1234"])");
  // Punctuation takes one leading space and trailing newlines.
  EXPECT_EQ(split(K::Llama3, "x !!\n\ny"), R"(["x"," !!\n\n","y"])");
  // Digits isolates every digit, and GPT-2's regex sees the text between them as a whole text:
  // " " before a digit stays a piece of its own (\s+(?!\S) at the end).
  EXPECT_EQ(split(K::Gpt2Digits, "a 1234 b"), R"(["a"," ","1","2","3","4"," b"])");
  EXPECT_EQ(split(K::Gpt2, "a 1234 b"), R"(["a"," 1234"," b"])");
  // U+11DE0 (Tolong Siki digit zero, Unicode 17.0) is a digit for Rust, not \p{N} for Oniguruma 16.0.
  EXPECT_EQ(split(K::Gpt2Digits, "x\U00011DE0y"), json({"x", "\U00011DE0", "y"}).dump());
  EXPECT_TRUE(is_numeric_char(0x11DE0));
  EXPECT_EQ(char_class(0x11DE0) & kClassNumber, 0);
  // No split, and a piece before every "▁" (MergedWithNext).
  EXPECT_EQ(split(K::Whole, "a b\u2581c"), json({"a b\u2581c"}).dump());
  EXPECT_EQ(split(K::Metaspace, "\u2581a\u2581b"), json({"\u2581a\u2581b"}).dump());
  EXPECT_EQ(split(K::MetaspaceSplit, "ab\u2581cd\u2581\u2581e\u2581"),
            json({"ab", "\u2581cd", "\u2581", "\u2581e", "\u2581"}).dump());
  EXPECT_EQ(split(K::MetaspaceSplit, "\u2581\u2581"), json({"\u2581", "\u2581"}).dump());
  EXPECT_EQ(split(K::MetaspaceSplit, ""), "[]");
}

}  // namespace
}  // namespace ember::llm
