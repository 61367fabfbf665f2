// tools/common/tokenizer_json: the checked-in tokenizers parse into what the runtime needs, and every
// feature the runtime does not implement is refused with a message naming the field and its value.
#include "tools/common/tokenizer_json.h"

#include <gtest/gtest.h>

#include <functional>

#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::llm {
namespace {

using nlohmann::json;
using tools::TokenizerData;
using tools::TokenizerJsonError;

TEST(TokenizerJsonTest, ParsesTheLlama3Tokenizer) {
  const TokenizerData d = tools::load_tokenizer_json(testing::data_path("llama3/tokenizer.json"),
                                                     testing::data_path("llama3/tokenizer_config.json"));
  EXPECT_EQ(d.pre_tokenizer, PreTokenizerKind::Llama3);
  EXPECT_EQ(d.normalizer, NormalizerKind::None);
  EXPECT_TRUE(d.ignore_merges);
  EXPECT_EQ(d.model_token_count, 1200u);
  EXPECT_EQ(d.token_offsets.size(), 1211u);
  ASSERT_EQ(d.added_tokens.size(), 10u);
  EXPECT_EQ(d.added_tokens[0].content, "<|begin_of_text|>");
  EXPECT_TRUE(d.added_tokens[0].special);
  EXPECT_TRUE(d.add_bos);
  EXPECT_EQ(d.bos_id, 1200u);
  EXPECT_EQ(d.bos_token_id, 1200);
  EXPECT_EQ(d.eos_token, "<|eot_id|>");
  EXPECT_EQ(d.eos_token_id, 1209);
  EXPECT_NE(d.chat_template.find("<|start_header_id|>"), std::string::npos);
  // The byte-level alphabet is undone: "Ġ" (U+0120) is the space byte.
  EXPECT_EQ(tools::byte_level_char(' '), 0x120u);
  EXPECT_EQ(tools::byte_level_char('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(d.token_offsets[221] - d.token_offsets[220], 1u);
}

TEST(TokenizerJsonTest, ParsesTheQwen2Tokenizer) {
  const TokenizerData d = tools::load_tokenizer_json(testing::data_path("qwen2/tokenizer.json"),
                                                     testing::data_path("qwen2/tokenizer_config.json"));
  EXPECT_EQ(d.pre_tokenizer, PreTokenizerKind::Qwen2);
  EXPECT_EQ(d.normalizer, NormalizerKind::Nfc);
  EXPECT_FALSE(d.ignore_merges);
  EXPECT_FALSE(d.add_bos);
  ASSERT_EQ(d.added_tokens.size(), 3u);
  EXPECT_EQ(d.bos_token_id, -1);
  EXPECT_EQ(d.eos_token, "<|im_end|>");
  EXPECT_EQ(d.eos_token_id, static_cast<int32_t>(d.added_tokens[2].id));
  EXPECT_NE(d.chat_template.find("<|im_start|>"), std::string::npos);
}

// The llama3 or qwen2 tokenizer.json, edited by `edit`, must be refused with a message holding
// every string of `expect`.
void expect_refused(const char* kind, const std::function<void(json&)>& edit, std::vector<std::string> expect) {
  json j = json::parse(testing::read_file(testing::data_path(std::string(kind) + "/tokenizer.json")));
  edit(j);
  try {
    tools::parse_tokenizer_json(j.dump());
    ADD_FAILURE() << "accepted; expected an error mentioning " << expect[0];
  } catch (const TokenizerJsonError& e) {
    for (const std::string& s : expect) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}

TEST(TokenizerJsonTest, RefusesWhatTheRuntimeDoesNotImplement) {
  expect_refused("llama3", [](json& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "\"WordPiece\"", "BPE"});
  expect_refused("llama3", [](json& j) { j["model"]["byte_fallback"] = true; }, {"model.byte_fallback", "true"});
  expect_refused("llama3", [](json& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout", "0.1"});
  expect_refused("llama3", [](json& j) { j["model"]["unk_token"] = "<unk>"; }, {"model.unk_token", "<unk>"});
  expect_refused("llama3", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
                 {"model.continuing_subword_prefix", "##"});
  expect_refused("llama3", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+"; },
                 {"pre_tokenizer.pretokenizers[0].pattern.Regex", "\\\\s+"});
  expect_refused("llama3", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
                 {"behavior", "Removed"});
  expect_refused("llama3", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }, {"invert"});
  expect_refused("llama3", [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
                 {"pretokenizers[1].add_prefix_space", "true"});
  expect_refused("llama3", [](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; },
                 {"pre_tokenizer.type", "Whitespace"});
  expect_refused("llama3", [](json& j) { j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}}; },
                 {"pre_tokenizer.add_prefix_space"});
  expect_refused("llama3", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, {"normalizer.type", "NFKC"});
  expect_refused("llama3", [](json& j) { j["added_tokens"][3]["lstrip"] = true; }, {"added_tokens[3].lstrip", "true"});
  expect_refused("llama3", [](json& j) { j["added_tokens"][0]["rstrip"] = true; }, {"added_tokens[0].rstrip"});
  expect_refused("llama3", [](json& j) { j["added_tokens"][1]["single_word"] = true; }, {"added_tokens[1].single_word"});
  expect_refused("qwen2", [](json& j) { j["added_tokens"][1]["normalized"] = true; }, {"added_tokens[1].normalized"});
  expect_refused("llama3", [](json& j) { j["added_tokens"][1]["content"] = "<|begin_of_text|>"; },
                 {"added_tokens[1].content", "listed twice"});
  expect_refused("llama3", [](json& j) { j["added_tokens"][2]["id"] = 1300; }, {"ids must be dense"});
  // Ids far beyond the vocabulary are refused before they size the added-token table (fuzzing).
  expect_refused("llama3", [](json& j) { j["added_tokens"][2]["id"] = 4294967295u; },
                 {"added_tokens[2].id = 4294967295", "is beyond model.vocab and the added tokens", "ids must be dense"});
  expect_refused("llama3", [](json& j) { j["added_tokens"][2]["id"] = uint64_t{1} << 40; },
                 {"added_tokens[2].id = 1099511627776", "ids must be dense"});
  expect_refused("llama3", [](json& j) { j["decoder"] = {{"type", "Metaspace"}}; }, {"decoder.type", "Metaspace"});
  expect_refused("llama3", [](json& j) { j["decoder"] = nullptr; }, {"decoder"});
  expect_refused("llama3", [](json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
                 {"post_processor.type", "RobertaProcessing"});
  expect_refused("llama3", [](json& j) {
    auto& single = j["post_processor"]["processors"][1]["single"];
    std::swap(single[0], single[1]);  // "$A <bos>": an EOS-style template
  }, {"post_processor.processors[1].single"});
  expect_refused("llama3", [](json& j) { j["truncation"] = {{"max_length", 8}}; }, {"truncation", "max_length"});
  expect_refused("llama3", [](json& j) { j["model"]["vocab"]["zz!"] = 5000; }, {"model.vocab[\"zz!\"]", "5000"});
  expect_refused("llama3", [](json& j) { j["model"]["vocab"]["\xE2\x82\xAC"] = static_cast<int>(j["model"]["vocab"].size()); },
                 {"byte-level alphabet"});
  expect_refused("llama3", [](json& j) { j["model"]["merges"][3] = "qqq zzz"; }, {"model.merges[3]", "qqq zzz"});
  expect_refused("llama3", [](json& j) { j["model"]["merges"][4] = "a b c"; }, {"model.merges[4]"});
  try {
    tools::parse_tokenizer_json("{\"model\": ", "", "x/tokenizer.json");
    ADD_FAILURE() << "accepted malformed JSON";
  } catch (const TokenizerJsonError& e) {
    EXPECT_NE(std::string(e.what()).find("x/tokenizer.json: not valid JSON"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tools::load_tokenizer_json("/nonexistent/tokenizer.json"), TokenizerJsonError);
}

TEST(TokenizerJsonTest, RefusesBadConfigFields) {
  const std::string tokenizer = testing::read_file(testing::data_path("llama3/tokenizer.json"));
  json config = json::parse(testing::read_file(testing::data_path("llama3/tokenizer_config.json")));
  config["eos_token"] = "<|not_a_token|>";
  try {
    tools::parse_tokenizer_json(tokenizer, config.dump(), "m/tokenizer.json");
    ADD_FAILURE() << "accepted an unknown eos_token";
  } catch (const TokenizerJsonError& e) {
    EXPECT_NE(std::string(e.what()).find("m/tokenizer_config.json: eos_token"), std::string::npos) << e.what();
  }
  config["eos_token"] = {{"content", "<|end_of_text|>"}};  // the older object form
  EXPECT_EQ(tools::parse_tokenizer_json(tokenizer, config.dump()).eos_token_id, 1201);
}

TEST(TokenizerJsonTest, AcceptsBothMergeFormatsAndTheGpt2PreTokenizer) {
  json j = json::parse(testing::read_file(testing::data_path("llama3/tokenizer.json")));
  const TokenizerData strings = tools::parse_tokenizer_json(j.dump());
  for (json& m : j["model"]["merges"]) {  // "a b" -> ["a", "b"] (what tokenizers >= 0.20 writes)
    const std::string s = m.get<std::string>();
    m = json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  const TokenizerData pairs = tools::parse_tokenizer_json(j.dump());
  ASSERT_EQ(strings.merges.size(), pairs.merges.size());
  for (size_t i = 0; i < strings.merges.size(); ++i) {
    EXPECT_EQ(strings.merges[i].left, pairs.merges[i].left);
    EXPECT_EQ(strings.merges[i].right, pairs.merges[i].right);
  }
  EXPECT_EQ(pairs.pre_tokenizer, PreTokenizerKind::Gpt2);
}

}  // namespace
}  // namespace ember::llm
