// tools/common/tokenizer_json: the checked-in tokenizers parse into what the runtime needs (the
// byte-level and the SentencePiece layouts), and every feature the runtime does not implement is
// refused with a message naming the field and its value.
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
  expect_refused("llama3", [](json& j) { j["model"]["byte_fallback"] = true; },
                 {"model.byte_fallback", "true", "byte-level pre-tokenizer"});
  expect_refused("llama3", [](json& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout", "0.1"});
  expect_refused("llama3", [](json& j) { j["model"]["unk_token"] = "<unk>"; },
                 {"model.unk_token", "<unk>", "not a token of model.vocab"});
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
  expect_refused("llama3", [](json& j) { j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}}; },
                 {"decoder.type", "Metaspace", "not byte-level"});
  expect_refused("llama3", [](json& j) { j["decoder"] = {{"type", "CTC"}}; }, {"decoder.type", "CTC"});
  expect_refused("llama3", [](json& j) { j["decoder"] = nullptr; }, {"decoder"});
  // An added token whose content is a vocabulary token gets that token's id in HF.
  expect_refused("llama3", [](json& j) { j["added_tokens"][2]["content"] = "a"; },
                 {"added_tokens[2].content = \"a\"", "model.vocab's token"});
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

TEST(TokenizerJsonTest, ParsesTheSentencePieceLayouts) {
  const std::string meta = "\u2581";
  const TokenizerData llama2 = tools::load_tokenizer_json(testing::data_path("llama2/tokenizer.json"),
                                                          testing::data_path("llama2/tokenizer_config.json"));
  EXPECT_EQ(llama2.normalizer, NormalizerKind::PrependReplace);
  EXPECT_EQ(llama2.pre_tokenizer, PreTokenizerKind::Whole);
  EXPECT_EQ(llama2.decoder, DecoderKind::ReplaceByteFallback);
  EXPECT_EQ(llama2.decoder_strip_spaces, 1u);
  EXPECT_TRUE(llama2.byte_fallback);
  EXPECT_TRUE(llama2.fuse_unk);
  EXPECT_EQ(llama2.unk_id, 0);
  EXPECT_TRUE(llama2.add_bos);
  EXPECT_EQ(llama2.bos_id, 1u);
  EXPECT_EQ(llama2.bos_token_id, 1);  // {"__type": "AddedToken", "content": "<s>"} in tokenizer_config.json
  EXPECT_EQ(llama2.eos_token_id, 2);
  ASSERT_EQ(llama2.added_tokens.size(), 3u);  // <unk> <s> </s>: also vocabulary ids 0-2
  EXPECT_EQ(llama2.model_token_count, llama2.token_offsets.size() - 1);
  // Token strings stay strings: "<0x41>" is six bytes, "▁" three.
  auto token = [](const TokenizerData& d, uint32_t id) {
    return std::string(d.token_bytes.begin() + d.token_offsets[id], d.token_bytes.begin() + d.token_offsets[id + 1]);
  };
  EXPECT_EQ(token(llama2, 3 + 0x41), "<0x41>");
  bool has_meta = false;
  for (uint32_t id = 0; id < llama2.model_token_count; ++id) has_meta |= token(llama2, id) == meta;
  EXPECT_TRUE(has_meta);

  const TokenizerData mistral = tools::load_tokenizer_json(testing::data_path("mistral/tokenizer.json"));
  EXPECT_EQ(mistral.normalizer, NormalizerKind::None);
  EXPECT_EQ(mistral.pre_tokenizer, PreTokenizerKind::Metaspace);
  EXPECT_EQ(mistral.metaspace_prepend, MetaspacePrepend::First);
  EXPECT_EQ(mistral.decoder, DecoderKind::ReplaceByteFallback);
  EXPECT_EQ(mistral.added_tokens.size(), 6u);

  const TokenizerData gemma = tools::load_tokenizer_json(testing::data_path("gemma/tokenizer.json"),
                                                         testing::data_path("gemma/tokenizer_config.json"));
  EXPECT_EQ(gemma.normalizer, NormalizerKind::Replace);
  EXPECT_EQ(gemma.pre_tokenizer, PreTokenizerKind::Whole);  // Split(" ") after Replace(" ", "▁"): a no-op
  EXPECT_EQ(gemma.decoder, DecoderKind::ReplaceByteFallback);
  EXPECT_EQ(gemma.decoder_strip_spaces, 0u);
  EXPECT_EQ(gemma.unk_id, 3);
  EXPECT_EQ(gemma.bos_id, 2u);
  EXPECT_EQ(gemma.eos_token, "<eos>");
  EXPECT_EQ(token(gemma, 7 + 9), "\t");  // GemmaConverter's "\t" in place of "<0x09>"
}

TEST(TokenizerJsonTest, ParsesTheSmolLmAndGpt2Layouts) {
  const TokenizerData smollm = tools::load_tokenizer_json(testing::data_path("smollm/tokenizer.json"),
                                                          testing::data_path("smollm/tokenizer_config.json"));
  EXPECT_EQ(smollm.pre_tokenizer, PreTokenizerKind::Gpt2Digits);
  EXPECT_EQ(smollm.decoder, DecoderKind::ByteLevel);
  EXPECT_EQ(smollm.unk_id, -1);
  EXPECT_FALSE(smollm.add_bos);
  ASSERT_EQ(smollm.added_tokens.size(), 17u);
  EXPECT_EQ(smollm.added_tokens[2].content, "<|im_end|>");
  EXPECT_EQ(smollm.eos_token_id, 2);
  EXPECT_NE(smollm.chat_template.find("<|im_start|>"), std::string::npos);
  const TokenizerData gpt2 = tools::load_tokenizer_json(testing::data_path("gpt2/tokenizer.json"),
                                                        testing::data_path("gpt2/tokenizer_config.json"));
  EXPECT_EQ(gpt2.pre_tokenizer, PreTokenizerKind::Gpt2);
  ASSERT_EQ(gpt2.added_tokens.size(), 1u);
  EXPECT_EQ(gpt2.added_tokens[0].id, gpt2.model_token_count - 1);  // <|endoftext|>: in the vocabulary, normalized
  EXPECT_EQ(gpt2.eos_token_id, static_cast<int32_t>(gpt2.model_token_count - 1));
}

TEST(TokenizerJsonTest, AcceptsTheMetaspaceSpellingsAndUnkInByteLevelLayouts) {
  json j = json::parse(testing::read_file(testing::data_path("mistral/tokenizer.json")));
  // tokenizers < 0.19 wrote add_prefix_space instead of prepend_scheme: true is "always", with split.
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}, {"split", true}};
  TokenizerData d = tools::parse_tokenizer_json(j.dump());
  EXPECT_EQ(d.pre_tokenizer, PreTokenizerKind::MetaspaceSplit);
  EXPECT_EQ(d.metaspace_prepend, MetaspacePrepend::Always);
  EXPECT_EQ(d.decoder, DecoderKind::MetaspaceNever);
  j["pre_tokenizer"] = nullptr;  // no pre-tokenizer and no normalizer: plain character-level BPE
  j["decoder"]["prepend_scheme"] = "first";
  d = tools::parse_tokenizer_json(j.dump());
  EXPECT_EQ(d.pre_tokenizer, PreTokenizerKind::Whole);
  EXPECT_EQ(d.decoder, DecoderKind::Metaspace);
  // unk_token in a byte-level layout: a byte without a token becomes it.
  json l = json::parse(testing::read_file(testing::data_path("llama3/tokenizer.json")));
  l["model"]["unk_token"] = "!";
  l["model"]["fuse_unk"] = true;
  d = tools::parse_tokenizer_json(l.dump());
  EXPECT_EQ(d.unk_id, l["model"]["vocab"]["!"].get<int32_t>());
  EXPECT_TRUE(d.fuse_unk);
}

TEST(TokenizerJsonTest, RefusesSentencePieceShapesTheRuntimeDoesNotImplement) {
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  const json prepend = {{"type", "Prepend"}, {"prepend", "\u2581"}};
  // Normalizers.
  expect_refused("llama2", [&](json& j) { j["normalizer"]["normalizers"] = {replace, prepend}; },
                 {"normalizer.normalizers", "Prepend", "are implemented"});
  expect_refused("llama2", [](json& j) { j["normalizer"]["normalizers"][0]["prepend"] = "_"; },
                 {"normalizer.normalizers", "\"_\""});
  expect_refused("gemma", [](json& j) { j["normalizer"]["pattern"] = {{"Regex", " "}}; }, {"normalizer = ", "Regex"});
  expect_refused("gemma", [](json& j) { j["normalizer"]["content"] = "_"; }, {"normalizer = ", "\"_\""});
  expect_refused("llama2", [](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, {"normalizer.type", "Lowercase"});
  // Pre-tokenizers.
  expect_refused("mistral", [](json& j) { j["pre_tokenizer"]["replacement"] = "_"; },
                 {"pre_tokenizer.replacement", "\"_\"", "only \"\u2581\""});
  expect_refused("mistral", [](json& j) { j["pre_tokenizer"]["prepend_scheme"] = "sometimes"; },
                 {"pre_tokenizer.prepend_scheme", "sometimes"});
  expect_refused("mistral", [](json& j) { j["pre_tokenizer"].erase("prepend_scheme"); j["pre_tokenizer"]["add_prefix_space"] = false; },
                 {"pre_tokenizer.add_prefix_space", "false", "contradicts prepend_scheme"});
  expect_refused("mistral", [](json& j) { j["normalizer"] = {{"type", "NFC"}}; },
                 {"normalizer", "before the Metaspace pre-tokenizer"});
  expect_refused("gemma", [](json& j) { j["pre_tokenizer"]["behavior"] = "Isolated"; },
                 {"pre_tokenizer = ", "Isolated", "MergedWithPrevious"});
  expect_refused("llama3", [](json& j) {
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  }, {"pre_tokenizer.type", "Split"});
  expect_refused("smollm", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false; },
                 {"pre_tokenizer.pretokenizers[0].individual_digits", "false"});
  expect_refused("smollm", [](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = false; },
                 {"pre_tokenizer.pretokenizers[1].use_regex", "GPT-2 regex"});
  expect_refused("smollm", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["type"] = "Punctuation"; },
                 {"pre_tokenizer.pretokenizers[0].type", "Punctuation"});
  // Decoders.
  expect_refused("llama2", [](json& j) { j["decoder"]["decoders"].erase(2); }, {"decoder.decoders", "ByteFallback"});
  expect_refused("llama2", [](json& j) { j["decoder"]["decoders"][3]["stop"] = 1; }, {"decoder.decoders[3].stop", "1"});
  expect_refused("llama2", [](json& j) { j["decoder"]["decoders"][3]["content"] = "x"; },
                 {"decoder.decoders[3].content", "\"x\""});
  expect_refused("llama2", [](json& j) { j["decoder"]["decoders"][3]["start"] = 300; }, {"decoder.decoders[3].start", "300"});
  expect_refused("llama2", [](json& j) { j["decoder"]["decoders"][3] = {{"type", "Fuse"}}; },
                 {"decoder.decoders[3].type", "Fuse", "expected Strip"});
  expect_refused("llama2", [](json& j) { j["decoder"] = {{"type", "ByteLevel"}}; },
                 {"decoder.type", "ByteLevel", "byte-level pre-tokenizer"});
  expect_refused("gpt2", [](json& j) {
    j["decoder"] = json::parse(testing::read_file(testing::data_path("gemma/tokenizer.json")))["decoder"];
  }, {"decoder.type", "Sequence", "not byte-level"});
  // Model.
  expect_refused("llama2", [](json& j) { j["model"]["unk_token"] = "<nope>"; }, {"model.unk_token", "<nope>"});
  expect_refused("gemma", [](json& j) { j["added_tokens"][5]["normalized"] = true; },
                 {"added_tokens[5].normalized", "after the normalizer"});
}

}  // namespace
}  // namespace ember::llm
