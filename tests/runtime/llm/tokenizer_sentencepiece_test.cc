// The SentencePiece layouts on small hand-built vocabularies: what the goldens of
// tokenizer_golden_test.cc cannot pin down (byte-token spellings no release has, the stream
// decoder's hold limit, buffer sizes, state on errors) and every load error of these layouts.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/llm/tokenizer.h"
#include "tests/common/test_util.h"
#include "tests/runtime/llm/tokenizer_test_util.h"

namespace ember::llm {
namespace {

using testing::decode;
using testing::encode;
using testing::stream_decode;

const std::string kMeta = "\u2581";

// A Llama-2-style desc: <unk> <s> </s>, the 256 byte tokens, then `pieces`; added tokens after.
struct SpTokenizer {
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

  explicit SpTokenizer(std::vector<std::string> pieces) {
    tokens = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      tokens.push_back(name);
    }
    tokens.insert(tokens.end(), pieces.begin(), pieces.end());
    desc.pre_tokenizer = PreTokenizerKind::Whole;
    desc.normalizer = NormalizerKind::PrependReplace;
    desc.decoder = DecoderKind::ReplaceByteFallback;
    desc.decoder_strip_spaces = 1;
    desc.byte_fallback = true;
    desc.fuse_unk = true;
    desc.unk_id = 0;
  }
  int32_t id(const std::string& s) const {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == s) return static_cast<int32_t>(i);
    }
    for (size_t i = 0; i < added_content.size(); ++i) {
      if (added_content[i] == s) return static_cast<int32_t>(tokens.size() + i);
    }
    ADD_FAILURE() << "no token " << s;
    return 0;
  }
  std::vector<int32_t> ids(std::initializer_list<std::string> pieces) const {
    std::vector<int32_t> out;
    for (const std::string& p : pieces) out.push_back(id(p));
    return out;
  }
  void merge(const std::string& left, const std::string& right) {
    bool known = false;
    for (const std::string& t : tokens) known |= t == left + right;
    if (!known) tokens.push_back(left + right);
    merges.push_back({static_cast<uint32_t>(id(left)), static_cast<uint32_t>(id(right))});
  }
  void add(const std::string& content, bool special) {
    added_content.push_back(content);
    added_special.push_back(special);
  }
  TokenizerDesc& build() {
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
      added.push_back({static_cast<uint32_t>(tokens.size() + i), added_content[i].data(),
                       static_cast<uint32_t>(added_content[i].size()), added_special[i]});
    }
    desc.token_bytes = Span<const uint8_t>(bytes.data(), bytes.size());
    desc.token_offsets = Span<const uint32_t>(offsets.data(), offsets.size());
    desc.model_token_count = static_cast<uint32_t>(tokens.size());
    desc.merges = Span<const MergeRule>(merges.data(), merges.size());
    desc.added_tokens = Span<const AddedTokenDesc>(added.data(), added.size());
    return desc;
  }
  Result<Tokenizer> load(ErrorContext* ctx = nullptr) {
    memory.assign(Tokenizer::memory_bytes(desc), 0);
    allocator = std::make_unique<BumpAllocator>(Span<uint8_t>(memory.data(), memory.size()));
    return Tokenizer::load(desc, *allocator, ctx);
  }
};

std::vector<int32_t> repeat(const std::vector<int32_t>& ids, size_t times) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < times; ++i) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

TEST(SentencePieceTest, EncodesCharactersWithByteFallbackAndUnk) {
  SpTokenizer t({kMeta, "a", "b", "\u4f60"});
  t.merge(kMeta, "a");
  t.merge("a", "b");
  t.merge(kMeta + "a", "b");
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  // Prepend + Replace: "▁ab▁ab"; a space at the start gives a "▁" of its own.
  EXPECT_EQ(encode(*tok, "ab ab", false), t.ids({kMeta + "ab", kMeta + "ab"}));
  EXPECT_EQ(encode(*tok, " ab", false), t.ids({kMeta, kMeta + "ab"}));
  EXPECT_EQ(encode(*tok, "", true), std::vector<int32_t>{});  // no BOS: the desc has none
  // A character without a token: its UTF-8 bytes as byte tokens; one that is a token stays whole.
  EXPECT_EQ(encode(*tok, "\u597d\u4f60", false), t.ids({kMeta, "<0xE5>", "<0xA5>", "<0xBD>", "\u4f60"}));
  // Without byte fallback: one fused <unk> per run of unknown characters; without fuse_unk one each.
  t.desc.byte_fallback = false;
  auto fused = t.load();
  ASSERT_TRUE(fused.is_ok());
  EXPECT_EQ(encode(*fused, "axyb", false), t.ids({kMeta + "a", "<unk>", "b"}));
  t.desc.fuse_unk = false;
  auto single = t.load();
  ASSERT_TRUE(single.is_ok());
  EXPECT_EQ(encode(*single, "axyb", false), t.ids({kMeta + "a", "<unk>", "<unk>", "b"}));
  t.desc.unk_id = -1;  // neither: the characters vanish
  auto dropped = t.load();
  ASSERT_TRUE(dropped.is_ok());
  EXPECT_EQ(encode(*dropped, "axyb", false), t.ids({kMeta + "ab"}));
}

TEST(SentencePieceTest, AnUnkWaitsForTheNextKnownCharacter) {
  // HF's merge_word adds a pending <unk> only before the next character that is a token (or at the
  // end), so byte fallback tokens of a later character go before it.
  SpTokenizer t({kMeta, "a"});
  t.tokens[3 + 0xE4] = "<0xE4_>";  // no byte token for 0xE4: "你" (E4 BD A0) cannot fall back
  t.desc.fuse_unk = false;
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(encode(*tok, "\u4f60\u00e9\u4f60a", false),
            t.ids({kMeta, "<0xC3>", "<0xA9>", "<unk>", "<unk>", "a"}));
}

TEST(SentencePieceTest, ByteTokensAreRecognizedAsRustParsesThem) {
  // ByteFallback takes six bytes "<0x..>" whose middle u8::from_str_radix(16) accepts: lower case,
  // and '+' with one digit; not "<0x4G>" or "<0x-1>".
  SpTokenizer t({kMeta, "a"});
  t.add("<0x+A>", false);
  t.add("<0xe4>", false);
  t.add("<0xbd>", false);
  t.add("<0xa0>", false);
  t.add("<0x4G>", false);
  t.add("<0x-1>", false);
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(decode(*tok, t.ids({"a", "<0x+A>", "a"}), false), "a\na");
  EXPECT_EQ(decode(*tok, t.ids({"<0xe4>", "<0xbd>", "<0xa0>"}), false), "\u4f60");
  EXPECT_EQ(decode(*tok, t.ids({"<0x4G>", "<0x-1>"}), false), "<0x4G><0x-1>");
  EXPECT_EQ(stream_decode(*tok, t.ids({"a", "<0x+A>", "<0xe4>", "<0xBD>", "<0xa0>"}), false), "a\n\u4f60");
}

TEST(SentencePieceTest, DecodeStripsOnlyTheFirstSpacesOfTheText) {
  SpTokenizer t({kMeta, "a", kMeta + "a"});
  t.add("<x>", true);
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  // Strip(" ", 1, 0) runs after Fuse: one space off the whole text, wherever it came from; a
  // skipped special token is gone before it looks.
  EXPECT_EQ(decode(*tok, t.ids({kMeta + "a", kMeta + "a"}), false), "a a");
  EXPECT_EQ(decode(*tok, t.ids({"<0x20>", "<0x20>", kMeta + "a"}), false), "  a");
  EXPECT_EQ(decode(*tok, t.ids({"<x>", kMeta + "a"}), false), "<x> a");
  EXPECT_EQ(decode(*tok, t.ids({"<x>", kMeta + "a"}), true), "a");
  EXPECT_EQ(stream_decode(*tok, t.ids({"<x>", kMeta + "a"}), true), "a");
  for (const auto& ids : {t.ids({"<0x20>", "<0x20>", kMeta + "a"}), t.ids({kMeta, kMeta, "a"})}) {
    EXPECT_EQ(stream_decode(*tok, ids, false), decode(*tok, ids, false));
  }
  t.desc.decoder_strip_spaces = 3;
  auto three = t.load();
  ASSERT_TRUE(three.is_ok());
  EXPECT_EQ(decode(*three, t.ids({kMeta, kMeta + "a", kMeta + "a"}), false), "a a");
  EXPECT_EQ(stream_decode(*three, t.ids({kMeta, kMeta + "a", kMeta + "a"}), false), "a a");
}

TEST(SentencePieceTest, MetaspaceDecoderDropsTheFirstTokensMetaspaces) {
  SpTokenizer t({kMeta, "a", kMeta + kMeta, kMeta + "a"});
  t.add("<x>", true);
  t.desc.decoder = DecoderKind::Metaspace;
  t.desc.decoder_strip_spaces = 0;
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  // Every "▁" of the first token goes (HF: i == 0), later ones are spaces; byte tokens stay text.
  EXPECT_EQ(decode(*tok, t.ids({kMeta + kMeta, kMeta + "a"}), false), " a");
  EXPECT_EQ(decode(*tok, t.ids({"<x>", kMeta + kMeta, kMeta + "a"}), false), "<x>   a");
  EXPECT_EQ(decode(*tok, t.ids({"<x>", kMeta + "a"}), true), "a");  // the first token after skipping
  EXPECT_EQ(decode(*tok, t.ids({"a", "<0x41>"}), false), "a<0x41>");
  EXPECT_EQ(stream_decode(*tok, t.ids({"<x>", kMeta + kMeta, kMeta + "a"}), true), " a");
  t.desc.decoder = DecoderKind::MetaspaceNever;
  auto never = t.load();
  ASSERT_TRUE(never.is_ok());
  EXPECT_EQ(decode(*never, t.ids({kMeta + kMeta, kMeta + "a"}), false), "   a");
}

TEST(SentencePieceTest, StreamDecoderHoldsAByteRunUntilItEnds) {
  SpTokenizer t({kMeta, "a", kMeta + "a"});
  t.add("<x>", true);
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  StreamDecoder stream(*tok, /*skip_special_tokens=*/true);
  char out[1024];
  auto push = [&](const std::string& token) {
    auto n = stream.push(t.id(token), Span<char>(out, sizeof(out)));
    EXPECT_TRUE(n.is_ok());
    return std::string(out, n.is_ok() ? n.value() : 0);
  };
  // "你" is complete after three bytes, but a fourth byte token could still turn the run into
  // four U+FFFD: nothing comes out until a token that is not a byte (a skipped special is not one).
  EXPECT_EQ(push(kMeta + "a"), "a");
  EXPECT_EQ(push("<0xE4>"), "");
  EXPECT_EQ(push("<0xBD>"), "");
  EXPECT_EQ(push("<x>"), "");
  EXPECT_EQ(push("<0xA0>"), "");
  EXPECT_EQ(stream.pending_bytes(), 3u);
  EXPECT_EQ(push(kMeta + "a"), "\u4f60 a");
  // Ill-formed: its U+FFFDs come at once, one per byte token, and so do the rest of the run's.
  EXPECT_EQ(push("<0xE4>"), "");
  EXPECT_EQ(push("<0x41>"), "\uFFFD\uFFFD");
  EXPECT_EQ(push("<0xA0>"), "\uFFFD");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  EXPECT_EQ(push("a"), "a");
  // An unfinished run at the end: one U+FFFD per byte token.
  EXPECT_EQ(push("<0xE4>"), "");
  EXPECT_EQ(push("<0xBD>"), "");
  auto n = stream.flush(Span<char>(out, sizeof(out)));
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(std::string(out, n.value()), "\uFFFD\uFFFD");
  EXPECT_EQ(stream.pending_bytes(), 0u);
}

TEST(SentencePieceTest, StreamDecoderGivesOutLongWellFormedRunsEarly) {
  SpTokenizer t({kMeta, "a"});
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  const std::vector<int32_t> ni = t.ids({"<0xE4>", "<0xBD>", "<0xA0>"});  // "你"
  std::string text;
  for (int i = 0; i < 100; ++i) text += "\u4f60";
  // 300 bytes of well-formed run: past the 256 held, complete characters come out; same text.
  const std::vector<int32_t> run = repeat(ni, 100);
  EXPECT_EQ(decode(*tok, run, false), text);
  EXPECT_EQ(stream_decode(*tok, run, false), text);
  StreamDecoder stream(*tok);
  std::vector<char> out(stream.max_push_bytes());
  size_t given = 0;
  for (int32_t id : run) given += stream.push(id, Span<char>(out.data(), out.size())).value();
  EXPECT_EQ(given, 255u);  // at the 257th byte: the 85 complete characters of the 256 held
  EXPECT_EQ(stream.pending_bytes(), 45u);
  // The documented difference: such a run that then turns ill-formed. decode() gives one U+FFFD
  // per byte token of the run; the stream already gave out the first 85 characters.
  std::vector<int32_t> bad = repeat(ni, 86);
  bad.push_back(t.id("<0x80>"));
  std::string expect_stream;
  for (int i = 0; i < 85; ++i) expect_stream += "\u4f60";
  for (int i = 0; i < 4; ++i) expect_stream += "\uFFFD";
  EXPECT_EQ(stream_decode(*tok, bad, false), expect_stream);
  std::string expect_decode;
  for (size_t i = 0; i < bad.size(); ++i) expect_decode += "\uFFFD";
  EXPECT_EQ(decode(*tok, bad, false), expect_decode);
}

TEST(SentencePieceTest, StreamDecoderKeepsItsStateOnErrors) {
  ember::testing::QuietLogs quiet;
  SpTokenizer t({kMeta, "a", kMeta + "a"});
  t.build();
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  StreamDecoder stream(*tok);
  char out[64];
  for (const char* b : {"<0xE4>", "<0xBD>", "<0xA0>"}) ASSERT_TRUE(stream.push(t.id(b), Span<char>(out, sizeof(out))).is_ok());
  ErrorContext ctx;
  auto small = stream.push(t.id(kMeta + "a"), Span<char>(out, 4), &ctx);  // "你 a" needs 5
  ASSERT_FALSE(small.is_ok());
  EXPECT_EQ(small.error(), Error::OutOfMemory);
  EXPECT_NE(std::string(ctx.message).find("stream decode output"), std::string::npos) << ctx.message;
  EXPECT_EQ(stream.pending_bytes(), 3u);
  EXPECT_EQ(stream.push(-1, Span<char>(out, sizeof(out))).error(), Error::InvalidArgument);
  EXPECT_EQ(stream.flush(Span<char>(out, 2)).error(), Error::OutOfMemory);  // 3 bytes of text
  EXPECT_EQ(stream.pending_bytes(), 3u);
  auto n = stream.push(t.id(kMeta + "a"), Span<char>(out, sizeof(out)));
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(std::string(out, n.value()), "\u4f60 a");
  // A failed push does not use up Strip's space either.
  StreamDecoder fresh(*tok);
  EXPECT_EQ(fresh.push(t.id(kMeta + "a"), Span<char>(out, 0)).error(), Error::OutOfMemory);
  auto a = fresh.push(t.id(kMeta + "a"), Span<char>(out, sizeof(out)));
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(std::string(out, a.value()), "a");
}

TEST(SentencePieceTest, WorstCaseBuffersSuffice) {
  SpTokenizer t({"a"});  // no "▁": every space and prepended "▁" takes 3 byte tokens
  t.add("<x>", false);
  t.build();
  for (auto [pre, normalizer, prepend] :
       {std::tuple{PreTokenizerKind::Whole, NormalizerKind::PrependReplace, MetaspacePrepend::Always},
        std::tuple{PreTokenizerKind::Whole, NormalizerKind::Replace, MetaspacePrepend::Always},
        std::tuple{PreTokenizerKind::MetaspaceSplit, NormalizerKind::None, MetaspacePrepend::Always},
        std::tuple{PreTokenizerKind::Metaspace, NormalizerKind::None, MetaspacePrepend::First},
        std::tuple{PreTokenizerKind::MetaspaceSplit, NormalizerKind::None, MetaspacePrepend::Never}}) {
    t.desc.pre_tokenizer = pre;
    t.desc.normalizer = normalizer;
    t.desc.metaspace_prepend = prepend;
    auto tok = t.load();
    ASSERT_TRUE(tok.is_ok());
    // A "▁" before every one-byte segment (6 bytes per 2 input bytes), spaces (3 per byte), and
    // characters that fall back to 3 byte tokens each.
    std::string segments, chars;
    for (int i = 0; i < 500; ++i) segments += "b<x>";
    for (int i = 0; i < 500; ++i) chars += "\u4f60";
    for (const std::string& text : {segments, std::string(3000, ' '), chars, std::string("b")}) {
      const std::vector<int32_t> ids = encode(*tok, text, true);  // sized by max_token_count / encode_scratch_bytes
      EXPECT_FALSE(ids.empty());
      EXPECT_LE(ids.size(), (*tok).max_token_count(text.size()));
      EXPECT_EQ(stream_decode(*tok, ids, false), decode(*tok, ids, false));
    }
  }
  // One scratch byte short of the rewritten segment is reported, not overrun.
  t.desc.pre_tokenizer = PreTokenizerKind::Whole;
  t.desc.normalizer = NormalizerKind::PrependReplace;
  auto tok = t.load();
  ASSERT_TRUE(tok.is_ok());
  ember::testing::QuietLogs quiet;
  int32_t ids[64];
  std::vector<uint8_t> scratch(16 + 7);  // "a a" becomes 8 bytes (16 reserved); its BPE needs 224
  ErrorContext ctx;
  auto r = tok->encode("a a", Span<int32_t>(ids, 64), Span<uint8_t>(scratch.data(), scratch.size()), false, &ctx);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error(), Error::OutOfMemory);
  EXPECT_NE(std::string(ctx.message).find("encode scratch"), std::string::npos) << ctx.message;
}

TEST(SentencePieceTest, LoadRejectsLayoutsThatDoNotFit) {
  ember::testing::QuietLogs quiet;
  struct Case {
    const char* name;
    void (*mutate)(SpTokenizer&);
    const char* message;
  };
  const Case cases[] = {
      {"byte-level decoder", [](SpTokenizer& t) { t.desc.decoder = DecoderKind::ByteLevel; }, "does not fit pre-tokenizer"},
      {"byte-level pre-tokenizer",
       [](SpTokenizer& t) { t.desc.pre_tokenizer = PreTokenizerKind::Gpt2Digits; }, "does not fit pre-tokenizer"},
      {"byte fallback, byte-level", [](SpTokenizer& t) {
         t.desc.pre_tokenizer = PreTokenizerKind::Gpt2;
         t.desc.decoder = DecoderKind::ByteLevel;
         t.desc.normalizer = NormalizerKind::None;
       }, "byte_fallback needs a pre-tokenizer that is not byte-level (kind 3 is)"},
      {"Replace, byte-level", [](SpTokenizer& t) {
         t.desc.pre_tokenizer = PreTokenizerKind::Llama3;
         t.desc.decoder = DecoderKind::ByteLevel;
         t.desc.byte_fallback = false;
         t.desc.normalizer = NormalizerKind::Replace;
       }, "normalizer kind 2 needs a pre-tokenizer that is not byte-level"},
      {"Metaspace after a normalizer",
       [](SpTokenizer& t) { t.desc.pre_tokenizer = PreTokenizerKind::MetaspaceSplit; },
       "the Metaspace pre-tokenizer (kind 7) runs without a normalizer (kind 3)"},
      {"strip without its decoder", [](SpTokenizer& t) { t.desc.decoder = DecoderKind::Metaspace; }, "decoder_strip_spaces 1"},
      {"unk past the vocabulary", [](SpTokenizer& t) { t.desc.unk_id = 100000; }, "unk_id 100000"},
      {"unk below -1", [](SpTokenizer& t) { t.desc.unk_id = -2; }, "unk_id -2"},
      {"unknown decoder", [](SpTokenizer& t) { t.desc.decoder = static_cast<DecoderKind>(9); }, "unknown decoder kind 9"},
      {"unknown prepend scheme",
       [](SpTokenizer& t) { t.desc.metaspace_prepend = static_cast<MetaspacePrepend>(5); }, "prepend scheme 5"},
      {"unknown pre-tokenizer",
       [](SpTokenizer& t) { t.desc.pre_tokenizer = static_cast<PreTokenizerKind>(8); }, "unknown pre-tokenizer kind 8"},
      {"token not UTF-8", [](SpTokenizer& t) { t.bytes[t.offsets[262]] = 0xFF; }, "token 262 is not valid UTF-8"},
  };
  for (const Case& c : cases) {
    SpTokenizer t({kMeta, "a", "b", "c", "d", "e"});
    t.build();
    c.mutate(t);
    ErrorContext ctx;
    auto r = t.load(&ctx);
    ASSERT_FALSE(r.is_ok()) << c.name;
    EXPECT_EQ(r.error(), Error::InvalidArgument) << c.name;
    EXPECT_NE(std::string(ctx.message).find(c.message), std::string::npos) << c.name << ": " << ctx.message;
  }
}

}  // namespace
}  // namespace ember::llm
