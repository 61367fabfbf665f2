// Tokenizer behaviour on small hand-built vocabularies, and every documented error.
#include "runtime/llm/tokenizer.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/common/test_util.h"
#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::llm {
namespace {

using testing::decode;
using testing::encode;

// A byte-level vocabulary: ids 0..255 are the single bytes, then `words` (their merges are added
// by merge()), then the added tokens.
struct TinyTokenizer {
  std::vector<std::string> tokens;
  std::vector<MergeRule> merges;
  std::vector<std::string> added_content;
  std::vector<bool> added_special;
  TokenizerDesc desc;
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> offsets;
  std::vector<AddedTokenDesc> added;
  std::vector<uint8_t> memory;
  std::unique_ptr<BumpAllocator> allocator;
  uint32_t model_count = 0;

  TinyTokenizer() {
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    desc.pre_tokenizer = PreTokenizerKind::Llama3;
  }
  uint32_t id(const std::string& s) const {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == s) return static_cast<uint32_t>(i);
    }
    ADD_FAILURE() << "no token " << s;
    return 0;
  }
  // Adds left+right as a token (if new) and the merge (left, right).
  void merge(const std::string& left, const std::string& right) {
    bool known = false;
    for (const std::string& t : tokens) known |= t == left + right;
    if (!known) tokens.push_back(left + right);
    merges.push_back({id(left), id(right)});
  }
  void add(const std::string& content, bool special) {
    added_content.push_back(content);
    added_special.push_back(special);
  }
  // Builds the desc (tokens, then added tokens with the next ids).
  TokenizerDesc& build() {
    model_count = static_cast<uint32_t>(tokens.size());
    bytes.clear();
    offsets.assign(1, 0);
    for (const std::string& t : tokens) {
      bytes.insert(bytes.end(), t.begin(), t.end());
      offsets.push_back(static_cast<uint32_t>(bytes.size()));
    }
    added.clear();
    for (size_t i = 0; i < added_content.size(); ++i) {
      bytes.insert(bytes.end(), added_content[i].begin(), added_content[i].end());
      offsets.push_back(static_cast<uint32_t>(bytes.size()));
      added.push_back({model_count + static_cast<uint32_t>(i), added_content[i].data(),
                       static_cast<uint32_t>(added_content[i].size()), added_special[i]});
    }
    desc.token_bytes = Span<const uint8_t>(bytes.data(), bytes.size());
    desc.token_offsets = Span<const uint32_t>(offsets.data(), offsets.size());
    desc.model_token_count = model_count;
    desc.merges = Span<const MergeRule>(merges.data(), merges.size());
    desc.added_tokens = Span<const AddedTokenDesc>(added.data(), added.size());
    return desc;
  }
  Result<Tokenizer> load(ErrorContext* ctx = nullptr) {
    memory.assign(Tokenizer::memory_bytes(desc), 0);
    allocator = std::make_unique<BumpAllocator>(Span<uint8_t>(memory.data(), memory.size()));
    return Tokenizer::load(desc, *allocator, ctx);
  }
  std::vector<int32_t> ids(std::initializer_list<std::string> pieces) const {
    std::vector<int32_t> out;
    for (const std::string& p : pieces) out.push_back(static_cast<int32_t>(id(p)));
    return out;
  }
};

TEST(TokenizerTest, MergesApplyByRankNotByPosition) {
  TinyTokenizer t;
  t.merge("b", "c");   // rank 0
  t.merge("a", "b");   // rank 1: would win if merging left to right
  t.merge("a", "bc");  // rank 2
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(encode(tok.value(), "abc", false), t.ids({"abc"}));
  EXPECT_EQ(encode(tok.value(), "abcab", false), t.ids({"abc", "ab"}));
  EXPECT_EQ(encode(tok.value(), "xbcz", false), t.ids({"x", "bc", "z"}));
}

TEST(TokenizerTest, EqualRanksMergeLeftmostFirst) {
  TinyTokenizer t;
  t.merge("a", "a");
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(encode(tok.value(), "aaa", false), t.ids({"aa", "a"}));
  EXPECT_EQ(encode(tok.value(), "aaaaa", false), t.ids({"aa", "aa", "a"}));
}

TEST(TokenizerTest, APairListedTwiceKeepsItsLastRank) {
  TinyTokenizer t;
  t.merge("a", "b");  // rank 0, and again at rank 2 below (HF's HashMap keeps the last)
  t.merge("b", "c");  // rank 1
  t.merge("a", "b");
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(encode(tok.value(), "abc", false), t.ids({"a", "bc"}));
}

TEST(TokenizerTest, IgnoreMergesEmitsAVocabularyPieceWhole) {
  TinyTokenizer t;
  t.merge("h", "e");
  t.tokens.push_back("hello");  // in the vocabulary, but no merge path leads to it
  t.build();
  {
    auto tok = t.load();
    ASSERT_TRUE(tok.is_ok());
    EXPECT_EQ(encode(tok.value(), "hello", false), t.ids({"he", "l", "l", "o"}));
  }
  t.desc.ignore_merges = true;
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(encode(tok.value(), "hello", false), t.ids({"hello"}));
  EXPECT_EQ(encode(tok.value(), "hellos", false), t.ids({"he", "l", "l", "o", "s"}));
}

TEST(TokenizerTest, BytesWithoutATokenAreDropped) {
  TinyTokenizer t;
  t.tokens['z'] = "";  // byte 'z' has no token (an empty token is never produced)
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(encode(tok.value(), "zaz", false), t.ids({"a"}));
}

TEST(TokenizerTest, BytesWithoutATokenBecomeUnkWhenThereIsOne) {
  TinyTokenizer t;
  t.tokens['z'] = "";
  t.tokens['y'] = "";
  t.merge("a", "a");
  t.build();
  t.desc.unk_id = '?';  // HF BPE's unk_token, in a byte-level layout
  auto single = t.load();
  ASSERT_TRUE(single.is_ok());
  EXPECT_EQ(encode(single.value(), "zyaaz", false), t.ids({"?", "?", "aa", "?"}));
  t.desc.fuse_unk = true;
  auto fused = t.load();
  ASSERT_TRUE(fused.is_ok());
  EXPECT_EQ(encode(fused.value(), "zyaaz", false), t.ids({"?", "aa", "?"}));
  EXPECT_EQ(encode(fused.value(), "z", false), t.ids({"?"}));
}

TEST(TokenizerTest, AddedTokensMatchLeftmostThenLongest) {
  TinyTokenizer t;
  t.add("<a>", true);
  t.add("<a>b", false);
  t.add("a>b", true);
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  const int32_t a = static_cast<int32_t>(t.model_count), ab = a + 1;
  EXPECT_EQ(encode(tok.value(), "x<a>by", false), (std::vector<int32_t>{'x', ab, 'y'}));
  EXPECT_EQ(encode(tok.value(), "<a>c<a>", false), (std::vector<int32_t>{a, 'c', a}));
  EXPECT_EQ(encode(tok.value(), "<<a>", false), (std::vector<int32_t>{'<', a}));
  // Decode: special tokens drop out with skip_special_tokens, non-special ones stay.
  const std::vector<int32_t> ids = {'x', a, ab, 'y'};
  EXPECT_EQ(decode(tok.value(), ids, false), "x<a><a>by");
  EXPECT_EQ(decode(tok.value(), ids, true), "x<a>by");
  EXPECT_EQ(tok->find_token("<a>b"), ab);
  EXPECT_EQ(tok->find_token("q"), 'q');
  EXPECT_EQ(tok->find_token("nope"), -1);
  EXPECT_TRUE(tok->is_special(static_cast<uint32_t>(a)));
  EXPECT_FALSE(tok->is_special(static_cast<uint32_t>(ab)));
}

TEST(TokenizerTest, BosOnlyWithAddSpecialTokens) {
  TinyTokenizer t;
  t.add("<s>", true);
  t.build();
  t.desc.add_bos = true;
  t.desc.bos_id = t.model_count;
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(encode(tok.value(), "a", true), (std::vector<int32_t>{static_cast<int32_t>(t.model_count), 'a'}));
  EXPECT_EQ(encode(tok.value(), "a", false), (std::vector<int32_t>{'a'}));
  EXPECT_EQ(encode(tok.value(), "", true), (std::vector<int32_t>{static_cast<int32_t>(t.model_count)}));
}

TEST(TokenizerTest, StreamDecoderHoldsBackSplitCharacters) {
  TinyTokenizer t;
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  StreamDecoder stream(tok.value());
  char out[64];
  const std::string emoji = "\xF0\x9F\x98\x80";
  for (size_t i = 0; i < 3; ++i) {
    auto n = stream.push(static_cast<uint8_t>(emoji[i]), Span<char>(out, sizeof(out)));
    ASSERT_TRUE(n.is_ok());
    EXPECT_EQ(n.value(), 0u);
  }
  auto n = stream.push(static_cast<uint8_t>(emoji[3]), Span<char>(out, sizeof(out)));
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(std::string(out, n.value()), emoji);
  // An incomplete character at the end becomes U+FFFD on flush; one cut by ASCII right away.
  ASSERT_TRUE(stream.push(0xE4, Span<char>(out, sizeof(out))).is_ok());
  auto cut = stream.push('a', Span<char>(out, sizeof(out)));
  ASSERT_TRUE(cut.is_ok());
  EXPECT_EQ(std::string(out, cut.value()), "\uFFFD" "a");
  ASSERT_TRUE(stream.push(0xE4, Span<char>(out, sizeof(out))).is_ok());
  EXPECT_EQ(stream.pending_bytes(), 1u);
  auto flushed = stream.flush(Span<char>(out, sizeof(out)));
  ASSERT_TRUE(flushed.is_ok());
  EXPECT_EQ(std::string(out, flushed.value()), "\uFFFD");
  EXPECT_EQ(stream.pending_bytes(), 0u);
}

TEST(TokenizerTest, WorstCaseBuffersSufficeForLongPieces) {
  auto tok = testing::load_tokenizer("qwen2");
  ASSERT_NE(tok, nullptr);
  // One huge letter run (a single piece) that NFC composes, and one that NFC expands (U+0958 is
  // composition-excluded: 3 bytes -> 6).
  std::string composed, expanded;
  for (int i = 0; i < 3000; ++i) composed += "e\u0301";
  for (int i = 0; i < 3000; ++i) expanded += "\u0958";
  for (const std::string& text : {composed, expanded, std::string(20000, 'x'), std::string(5000, ' ')}) {
    const std::vector<int32_t> ids = encode(**tok, text, true);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(decode(**tok, ids, true).size() > 0, true);
  }
}

// ---- Errors ----

TEST(TokenizerErrorTest, EncodeRejectsIllFormedUtf8) {
  ember::testing::QuietLogs quiet;
  TinyTokenizer t;
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  int32_t ids[16];
  uint8_t scratch[1024];
  ErrorContext ctx;
  auto r = tok->encode("ab\xC3(", Span<int32_t>(ids, 16), Span<uint8_t>(scratch, sizeof(scratch)), false, &ctx);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::InvalidArgument);
  EXPECT_NE(std::string(ctx.message).find("byte 2"), std::string::npos) << ctx.message;
}

TEST(TokenizerErrorTest, EncodeReportsTooSmallOutputAndScratch) {
  ember::testing::QuietLogs quiet;
  auto tok = testing::load_tokenizer("llama3");
  ASSERT_NE(tok, nullptr);
  const std::string text = "Hello world, this is a longer sentence.";
  std::vector<int32_t> full = encode(**tok, text, true);
  ASSERT_GT(full.size(), 4u);
  std::vector<int32_t> ids(full.size() - 1);
  std::vector<uint8_t> scratch((*tok)->encode_scratch_bytes(text.size()));
  ErrorContext ctx;
  auto r = (*tok)->encode(text, Span<int32_t>(ids.data(), ids.size()), Span<uint8_t>(scratch.data(), scratch.size()),
                          true, &ctx);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::OutOfMemory);
  EXPECT_NE(std::string(ctx.message).find("out_ids"), std::string::npos) << ctx.message;
  // Exactly enough room works.
  ids.resize(full.size());
  auto exact = (*tok)->encode(text, Span<int32_t>(ids.data(), ids.size()),
                              Span<uint8_t>(scratch.data(), scratch.size()), true);
  ASSERT_TRUE(exact.is_ok());
  EXPECT_EQ(ids, full);
  // No scratch: pieces of more than one byte need BPE work memory.
  ctx.clear();
  auto no_scratch =
      (*tok)->encode("Supercalifragilistic", Span<int32_t>(ids.data(), ids.size()), Span<uint8_t>(), false, &ctx);
  ASSERT_FALSE(no_scratch.is_ok());
  EXPECT_EQ(no_scratch.error(), Error::OutOfMemory);
  EXPECT_NE(std::string(ctx.message).find("scratch"), std::string::npos) << ctx.message;
}

TEST(TokenizerErrorTest, DecodeRejectsUnknownIdsAndSmallOutput) {
  ember::testing::QuietLogs quiet;
  auto tok = testing::load_tokenizer("qwen2");
  ASSERT_NE(tok, nullptr);
  char out[64];
  ErrorContext ctx;
  const int32_t bad[] = {5, static_cast<int32_t>((*tok)->token_count())};
  auto r = (*tok)->decode(Span<const int32_t>(bad, 2), Span<char>(out, sizeof(out)), false, &ctx);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::InvalidArgument);
  EXPECT_NE(std::string(ctx.message).find("ids[1]"), std::string::npos) << ctx.message;
  const int32_t negative[] = {-1};
  EXPECT_EQ((*tok)->decode(Span<const int32_t>(negative, 1), Span<char>(out, sizeof(out)), false).error(),
            Error::InvalidArgument);
  const std::vector<int32_t> ids = encode(**tok, "a fairly long sentence", false);
  EXPECT_EQ((*tok)->decode(Span<const int32_t>(ids.data(), ids.size()), Span<char>(out, 8), false).error(),
            Error::OutOfMemory);
  // StreamDecoder: an unknown id or a too-small buffer leaves its state as it was.
  StreamDecoder stream(**tok);
  const std::vector<int32_t> emoji = encode(**tok, "\U0001F600", false);
  ASSERT_TRUE(stream.push(emoji[0], Span<char>(out, sizeof(out))).is_ok());
  const size_t pending = stream.pending_bytes();
  EXPECT_EQ(stream.push(-3, Span<char>(out, sizeof(out))).error(), Error::InvalidArgument);
  EXPECT_EQ(stream.push(encode(**tok, "a", false)[0], Span<char>(out, 0)).error(), Error::OutOfMemory);
  EXPECT_EQ(stream.pending_bytes(), pending);
  std::string text;
  for (size_t i = 1; i < emoji.size(); ++i) {
    auto n = stream.push(emoji[i], Span<char>(out, sizeof(out)));
    ASSERT_TRUE(n.is_ok());
    text.append(out, n.value());
  }
  EXPECT_EQ(text, "\U0001F600");
}

TEST(TokenizerErrorTest, LoadRejectsInconsistentDescriptions) {
  ember::testing::QuietLogs quiet;
  struct Case {
    const char* name;
    void (*mutate)(TinyTokenizer&);
    const char* message;
  };
  const Case cases[] = {
      {"unknown pre-tokenizer", [](TinyTokenizer& t) { t.desc.pre_tokenizer = PreTokenizerKind::Invalid; }, "pre-tokenizer"},
      {"unknown normalizer", [](TinyTokenizer& t) { t.desc.normalizer = static_cast<NormalizerKind>(7); }, "normalizer"},
      {"offsets past the bytes", [](TinyTokenizer& t) { t.offsets.back() += 1; }, "token_offsets"},
      {"decreasing offsets", [](TinyTokenizer& t) { t.offsets[5] = t.offsets[7]; }, "decrease"},
      {"no offsets", [](TinyTokenizer& t) { t.desc.token_offsets = Span<const uint32_t>(); }, "token_offsets"},
      {"model count too large", [](TinyTokenizer& t) { t.desc.model_token_count = 100000; }, "model_token_count"},
      {"merge id out of range", [](TinyTokenizer& t) { t.merges[0].left = 99999; }, "merge 0"},
      {"merge result missing", [](TinyTokenizer& t) { t.merges[0] = {'q', 'q'}; }, "not a BPE token"},
      {"duplicate token bytes", [](TinyTokenizer& t) { t.bytes[t.offsets[256]] = 'x'; t.bytes[t.offsets[256] + 1] = 'y';
                                                        t.bytes[t.offsets[257]] = 'x'; t.bytes[t.offsets[257] + 1] = 'y'; }, "same bytes"},
      {"added id out of range", [](TinyTokenizer& t) { t.added[0].id = 99999; }, "added token"},
      {"added empty", [](TinyTokenizer& t) { t.added[0].content_size = 0; }, "empty"},
      {"added not UTF-8", [](TinyTokenizer& t) { t.added_content[0][1] = '\xC3'; }, "UTF-8"},
      {"added twice", [](TinyTokenizer& t) { t.added[1].id = t.added[0].id; }, "twice"},
      {"same content twice", [](TinyTokenizer& t) { t.added[1].content = t.added[0].content;
                                                     t.added[1].content_size = t.added[0].content_size; }, "same content"},
      {"hole in the ids", [](TinyTokenizer& t) { t.desc.model_token_count -= 1; t.desc.merges = Span<const MergeRule>(t.merges.data(), 1); },
       "neither"},
      {"bos not a token", [](TinyTokenizer& t) { t.desc.add_bos = true; t.desc.bos_id = 99999; }, "bos_id"},
      {"unk not a BPE token", [](TinyTokenizer& t) { t.desc.unk_id = static_cast<int32_t>(t.model_count); }, "unk_id"},
      {"SentencePiece decoder", [](TinyTokenizer& t) { t.desc.decoder = DecoderKind::ReplaceByteFallback; },
       "does not fit pre-tokenizer"},
  };
  for (const Case& c : cases) {
    TinyTokenizer t;
    t.merge("x", "y");
    t.merge("y", "x");
    t.add("<a>", true);
    t.add("<b>", true);
    t.build();
    c.mutate(t);
    ErrorContext ctx;
    auto r = t.load(&ctx);
    ASSERT_FALSE(r.is_ok()) << c.name;
    EXPECT_EQ(r.error(), Error::InvalidArgument) << c.name;
    EXPECT_NE(std::string(ctx.message).find(c.message), std::string::npos) << c.name << ": " << ctx.message;
  }
}

TEST(TokenizerErrorTest, LoadReportsASmallAllocator) {
  ember::testing::QuietLogs quiet;
  TinyTokenizer t;
  t.build();
  std::vector<uint8_t> memory(Tokenizer::memory_bytes(t.desc) / 2);
  BumpAllocator allocator(Span<uint8_t>(memory.data(), memory.size()));
  ErrorContext ctx;
  auto r = Tokenizer::load(t.desc, allocator, &ctx);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::OutOfMemory);
}

}  // namespace
}  // namespace ember::llm
