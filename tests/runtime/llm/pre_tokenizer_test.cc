// The hand-written regexes against HF's own pre-tokenizers (Oniguruma): tests/data/llm/pretokenize.jsonl.
#include "runtime/llm/pre_tokenizer.h"

#include <gtest/gtest.h>

#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::llm {
namespace {

std::vector<size_t> piece_ends(PreTokenizerKind kind, const std::string& text) {
  std::vector<size_t> ends;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = next_pre_token(kind, p, text.size(), pos);
    if (end <= pos || end > text.size()) {
      ADD_FAILURE() << "no progress at " << pos;
      break;
    }
    ends.push_back(end);
    pos = end;
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
      {"llama3", PreTokenizerKind::Llama3}, {"qwen2", PreTokenizerKind::Qwen2}, {"gpt2", PreTokenizerKind::Gpt2}};
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
}

}  // namespace
}  // namespace ember::llm
