// The tokenizer against Hugging Face `tokenizers` itself: every id of every golden string (with and
// without the BOS), every decode (with and without special tokens), and the streaming decoder's
// concatenated output, for the Llama-3 and Qwen2 tokenizers of tests/data/llm.
#include <gtest/gtest.h>

#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::llm {
namespace {

using testing::decode;
using testing::encode;
using testing::escaped;
using testing::stream_decode;

std::string ids_string(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i != 0) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

class TokenizerGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerGoldenTest, MatchesHuggingFace) {
  const std::string kind = GetParam();
  auto tok = testing::load_tokenizer(kind);
  ASSERT_NE(tok, nullptr);
  const std::vector<nlohmann::json> lines = testing::read_jsonl(testing::data_path(kind + "/golden.jsonl"));
  ASSERT_GT(lines.size(), 1000u);
  const nlohmann::json& header = lines[0];
  const std::vector<int32_t> bos = header["bos"].get<std::vector<int32_t>>();
  size_t encode_cases = 0, decode_cases = 0, failures = 0;
  // The message is built only for a failure (most of the time is otherwise spent formatting).
  auto report = [&](bool ok, auto&& what) {
    if (ok) return;
    if (++failures <= 20) ADD_FAILURE() << kind << ": " << what();
  };
  for (size_t i = 1; i < lines.size(); ++i) {
    const nlohmann::json& c = lines[i];
    std::vector<int32_t> ids;
    std::string decoded, skipped;
    if (c.contains("text")) {
      ++encode_cases;
      const std::string text = c["text"].get<std::string>();
      ids = c["ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> got = encode(**tok, text, false);
      report(got == ids, [&] { return "encode(" + escaped(text) + ") = " + ids_string(got) + ", HF " + ids_string(ids); });
      std::vector<int32_t> with_bos = bos;
      with_bos.insert(with_bos.end(), ids.begin(), ids.end());
      report(encode(**tok, text, true) == with_bos, [&] { return "encode(" + escaped(text) + ", add_special_tokens)"; });
      decoded = c.value("decoded", text);
    } else {
      ++decode_cases;
      ids = c["decode_ids"].get<std::vector<int32_t>>();
      decoded = c["decoded"].get<std::string>();
    }
    skipped = c.value("skipped", decoded);
    const std::string got_decoded = decode(**tok, ids, false), got_skipped = decode(**tok, ids, true);
    report(got_decoded == decoded, [&] {
      return "decode(" + ids_string(ids) + ") = " + escaped(got_decoded) + ", HF " + escaped(decoded);
    });
    report(got_skipped == skipped, [&] {
      return "decode(" + ids_string(ids) + ", skip) = " + escaped(got_skipped) + ", HF " + escaped(skipped);
    });
    report(stream_decode(**tok, ids, false) == decoded, [&] { return "stream decode(" + ids_string(ids) + ")"; });
    report(stream_decode(**tok, ids, true) == skipped, [&] { return "stream decode(" + ids_string(ids) + ", skip)"; });
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(encode_cases, header["cases"].get<size_t>());
  EXPECT_EQ(decode_cases, header["decode_cases"].get<size_t>());
  EXPECT_GE(encode_cases, 1000u);
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerGoldenTest, ::testing::Values("llama3", "qwen2"));

}  // namespace
}  // namespace ember::llm
