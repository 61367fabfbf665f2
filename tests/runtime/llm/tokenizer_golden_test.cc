// The tokenizer against Hugging Face `tokenizers` itself: every id of every golden string (with and
// without the BOS), every decode (with and without special tokens), and the streaming decoder's
// concatenated output, for the tokenizers of tests/data/llm (byte-level: Llama-3, Qwen2, SmolLM,
// GPT-2; SentencePiece: Llama-2, Mistral, Gemma) and the SentencePiece variants of
// sentencepiece_variants.jsonl (edits of the Mistral tokenizer.json, parsed by tokenizer_json).
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

struct CaseCounts {
  size_t encode = 0;
  size_t decode = 0;
};

// Compares `tok` with the golden lines (text + ids, or decode_ids); reports the first 20 failures.
CaseCounts compare(const std::string& name, const Tokenizer& tok, const std::vector<int32_t>& bos,
                   const std::vector<const nlohmann::json*>& lines) {
  CaseCounts counts;
  size_t failures = 0;
  // The message is built only for a failure (most of the time is otherwise spent formatting).
  auto report = [&](bool ok, auto&& what) {
    if (ok) return;
    if (++failures <= 20) ADD_FAILURE() << name << ": " << what();
  };
  for (const nlohmann::json* line : lines) {
    const nlohmann::json& c = *line;
    std::vector<int32_t> ids;
    std::string decoded, skipped;
    if (c.contains("text")) {
      ++counts.encode;
      const std::string text = c["text"].get<std::string>();
      ids = c["ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> got = encode(tok, text, false);
      report(got == ids, [&] { return "encode(" + escaped(text) + ") = " + ids_string(got) + ", HF " + ids_string(ids); });
      std::vector<int32_t> with_bos = bos;
      with_bos.insert(with_bos.end(), ids.begin(), ids.end());
      report(encode(tok, text, true) == with_bos, [&] { return "encode(" + escaped(text) + ", add_special_tokens)"; });
      decoded = c.value("decoded", text);
    } else {
      ++counts.decode;
      ids = c["decode_ids"].get<std::vector<int32_t>>();
      decoded = c["decoded"].get<std::string>();
    }
    skipped = c.value("skipped", decoded);
    const std::string got_decoded = decode(tok, ids, false), got_skipped = decode(tok, ids, true);
    report(got_decoded == decoded, [&] {
      return "decode(" + ids_string(ids) + ") = " + escaped(got_decoded) + ", HF " + escaped(decoded);
    });
    report(got_skipped == skipped, [&] {
      return "decode(" + ids_string(ids) + ", skip) = " + escaped(got_skipped) + ", HF " + escaped(skipped);
    });
    report(stream_decode(tok, ids, false) == decoded, [&] { return "stream decode(" + ids_string(ids) + ")"; });
    report(stream_decode(tok, ids, true) == skipped, [&] { return "stream decode(" + ids_string(ids) + ", skip)"; });
  }
  EXPECT_EQ(failures, 0u) << name;
  return counts;
}

class TokenizerGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerGoldenTest, MatchesHuggingFace) {
  const std::string kind = GetParam();
  auto tok = testing::load_tokenizer(kind);
  ASSERT_NE(tok, nullptr);
  const std::vector<nlohmann::json> lines = testing::read_jsonl(testing::data_path(kind + "/golden.jsonl"));
  ASSERT_GT(lines.size(), 1000u);
  const nlohmann::json& header = lines[0];
  EXPECT_EQ(header["kind"], kind);
  std::vector<const nlohmann::json*> cases;
  for (size_t i = 1; i < lines.size(); ++i) cases.push_back(&lines[i]);
  const CaseCounts counts = compare(kind, **tok, header["bos"].get<std::vector<int32_t>>(), cases);
  EXPECT_EQ(counts.encode, header["cases"].get<size_t>());
  EXPECT_EQ(counts.decode, header["decode_cases"].get<size_t>());
  EXPECT_GE(counts.encode, 1000u);
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerGoldenTest,
                         ::testing::Values("llama3", "qwen2", "llama2", "mistral", "gemma", "smollm", "gpt2"));

// Applies the variant's edits to the base tokenizer.json as make_tokenizer_golden.apply_edits does:
// {"path": JSON pointer, "value": v} sets, {"path", "rename": key} renames an object key.
nlohmann::json apply_edits(nlohmann::json j, const nlohmann::json& edits) {
  for (const nlohmann::json& edit : edits) {
    const nlohmann::json::json_pointer path(edit["path"].get<std::string>());
    if (edit.contains("rename")) {
      nlohmann::json& parent = j[path.parent_pointer()];
      parent[edit["rename"].get<std::string>()] = parent[path.back()];
      parent.erase(path.back());
    } else {
      j[path] = edit["value"];
    }
  }
  return j;
}

TEST(TokenizerGoldenTest, SentencePieceVariantsMatchHuggingFace) {
  const std::vector<nlohmann::json> lines = testing::read_jsonl(testing::data_path("sentencepiece_variants.jsonl"));
  ASSERT_GT(lines.size(), 1000u);
  const nlohmann::json& header = lines[0];
  const nlohmann::json base = nlohmann::json::parse(
      testing::read_file(testing::data_path(header["base"].get<std::string>() + "/tokenizer.json")));
  ASSERT_GE(header["variants"].size(), 12u);
  for (const nlohmann::json& variant : header["variants"]) {
    const std::string name = variant["name"].get<std::string>();
    auto tok = testing::load_tokenizer(tools::parse_tokenizer_json(apply_edits(base, variant["edits"]).dump()));
    ASSERT_NE(tok, nullptr) << name;
    std::vector<const nlohmann::json*> cases;
    for (size_t i = 1; i < lines.size(); ++i) {
      if (lines[i]["variant"] == name) cases.push_back(&lines[i]);
    }
    const CaseCounts counts = compare(name, **tok, variant["bos"].get<std::vector<int32_t>>(), cases);
    EXPECT_EQ(counts.encode, variant["cases"].get<size_t>()) << name;
    EXPECT_EQ(counts.decode, variant["decode_cases"].get<size_t>()) << name;
    EXPECT_GE(counts.encode, 200u) << name;
  }
}

}  // namespace
}  // namespace ember::llm
