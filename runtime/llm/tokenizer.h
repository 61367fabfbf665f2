// BPE tokenizer, bit-compatible with Hugging Face `tokenizers` (0.22): the same ids from encode()
// and the same text from decode(). Byte-level layouts (Llama-3, Qwen2, GPT-2, SmolLM) and
// SentencePiece layouts (Llama-2, Mistral, Gemma: "▁" for spaces, byte fallback, unk); README.md
// lists the tokenizer.json shapes each TokenizerDesc field stands for.
//
//   TokenizerDesc desc = ...;                       // borrowed views (program file or TokenizerData)
//   BumpAllocator memory(pool);                     // Tokenizer::memory_bytes(desc) bytes
//   EMBER_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(desc, memory, &ctx));
//   EMBER_ASSIGN_OR_RETURN(size_t n, tok.encode(prompt, ids, scratch, /*add_special_tokens=*/true, &ctx));
//
// Memory: load() takes its hash tables from the caller's allocator (no heap at all). encode(),
// decode() and StreamDecoder never allocate: they write into caller spans and use caller scratch,
// and report a span that is too small as Error::OutOfMemory (the ErrorContext names the size
// needed). The worst-case sizes are below; typical text needs far less.
//
// Thread-safety: a loaded Tokenizer is immutable; any number of threads may encode and decode at
// once (each with its own scratch and StreamDecoder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/core/memory_allocator.h"
#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/llm/pre_tokenizer.h"
#include "runtime/llm/unicode.h"

namespace ember::llm {

enum class NormalizerKind : uint8_t {
  None = 0,
  Nfc = 1,  // Unicode NFC with HF's Unicode 9.0 tables (runtime/llm/README.md)
  // SentencePiece layouts (need a pre-tokenizer that is not byte-level):
  Replace = 2,         // HF Replace(" ", "▁"): every space becomes U+2581 (Gemma)
  PrependReplace = 3,  // HF Sequence[Prepend("▁"), Replace(" ", "▁")]: also "▁" before every
                       // non-empty segment (Llama-2 and Mistral v0.1 "legacy")
};

// When the Metaspace pre-tokenizer puts a "▁" in front of a segment (HF's prepend_scheme), after
// turning its spaces into "▁": never when it already starts with one.
enum class MetaspacePrepend : uint8_t {
  Always = 0,  // every segment (segments are the text between added tokens)
  First = 1,   // only a segment at the start of the text (not one after an added token)
  Never = 2,
};

// How ids become text (HF's decoder).
enum class DecoderKind : uint8_t {
  // HF ByteLevel: token_bytes are the bytes; their concatenation is repaired as
  // String::from_utf8_lossy does. Needs a byte-level pre-tokenizer.
  ByteLevel = 0,
  // HF Sequence[Replace("▁", " "), ByteFallback, Fuse] and optionally Strip(" ", n, 0) last
  // (Llama-2, Mistral, Gemma): every "▁" becomes a space; a run of consecutive byte tokens
  // ("<0xNN>") becomes its bytes when they are well-formed UTF-8 and one U+FFFD per token
  // otherwise; then up to decoder_strip_spaces leading spaces of the text are dropped.
  ReplaceByteFallback = 1,
  // HF Metaspace with prepend_scheme always / first: "▁" becomes a space, except in the first
  // token, where it is dropped. Byte tokens stay "<0xNN>" text.
  Metaspace = 2,
  // HF Metaspace with prepend_scheme never: every "▁" becomes a space.
  MetaspaceNever = 3,
};

// A BPE merge: the pair of token ids (left, right) it joins. Merges are listed in rank order (rank
// 0 first); the id of the result is the token whose bytes are left's followed by right's.
struct MergeRule {
  uint32_t left;
  uint32_t right;
};

// A token split out of the input before anything else (HF "added token"): `content` is matched
// verbatim (UTF-8, before normalization). `special` tokens are dropped by decode when asked to.
struct AddedTokenDesc {
  uint32_t id = 0;
  const char* content = nullptr;  // borrowed; content_size bytes, not NUL-terminated
  uint32_t content_size = 0;
  bool special = false;
};

// A tokenizer, as non-owning views. Everything it points to must outlive the Tokenizer.
struct TokenizerDesc {
  // Token t (t < token_count) is token_bytes[token_offsets[t], token_offsets[t + 1]). Byte-level
  // layouts: the raw bytes after undoing the byte-level character mapping (so a token may hold
  // part of a UTF-8 character); for an added token, what HF's ByteLevel decoder makes of its
  // content. Other layouts: the token's string as tokenizer.json has it (UTF-8, "▁" for spaces,
  // "<0xNN>" for byte tokens); the decoder turns it into text.
  Span<const uint8_t> token_bytes;
  Span<const uint32_t> token_offsets;  // token_count + 1 entries, non-decreasing, [0] == 0
  // Ids [0, model_token_count) are the BPE vocabulary; every id at or above it must be an added
  // token (ids are dense, as in the Llama-3, Qwen2 and GPT-2 files).
  uint32_t model_token_count = 0;
  Span<const MergeRule> merges;
  Span<const AddedTokenDesc> added_tokens;
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::Invalid;
  NormalizerKind normalizer = NormalizerKind::None;
  // HF BPE `ignore_merges` (Llama-3): a pre-token that is itself in the vocabulary is emitted as
  // that one token without running the merges.
  bool ignore_merges = false;
  // Prepended by encode(add_special_tokens = true) when add_bos (HF's TemplateProcessing
  // "<bos> $A" post-processor).
  bool add_bos = false;
  uint32_t bos_id = 0;
  // HF BPE unk_token / fuse_unk / byte_fallback, for a character (a byte in byte-level layouts)
  // that is not a BPE token: with byte_fallback (not byte-level layouts only) it becomes the
  // tokens "<0xNN>" of its UTF-8 bytes when all exist; otherwise unk_id (-1: none, the character is
  // dropped), one per character or, with fuse_unk, one per run of such characters.
  int32_t unk_id = -1;
  bool fuse_unk = false;
  bool byte_fallback = false;
  // With the Metaspace pre-tokenizers: when a "▁" is put in front of a segment.
  MetaspacePrepend metaspace_prepend = MetaspacePrepend::Always;
  DecoderKind decoder = DecoderKind::ByteLevel;
  uint8_t decoder_strip_spaces = 0;  // ReplaceByteFallback: HF Strip(" ", n, 0)'s n
};

class Tokenizer {
 public:
  // Bytes load() takes from its allocator for `desc`, assuming the allocator's buffer is 16-aligned.
  static size_t memory_bytes(const TokenizerDesc& desc);

  // Checks `desc` and builds the lookup tables in `allocator`. Errors: InvalidArgument (the desc is
  // inconsistent: offsets, ids, a merge whose result is not a token, duplicate tokens or added
  // tokens, ill-formed UTF-8 in an added token (in any token of a SentencePiece layout), an
  // unknown kind, a decoder, normalizer or byte_fallback that does not fit the pre-tokenizer, an
  // unk_id that is not a BPE token; ctx says which), OutOfMemory (the allocator is too small).
  static Result<Tokenizer> load(const TokenizerDesc& desc, BumpAllocator& allocator, ErrorContext* ctx = nullptr);

  // ---- Encoding (HF Tokenizer::encode(text, add_special_tokens).ids) ----

  // Writes the ids of `text` (UTF-8) to out_ids and returns how many. Added tokens are split out
  // first (leftmost, then longest), each other segment is normalized, pre-tokenized and BPE-merged;
  // with add_special_tokens the BOS id comes first when the desc says add_bos.
  // Errors: InvalidArgument (ill-formed UTF-8; ctx has the byte offset), OutOfMemory (out_ids or
  // scratch too small; out_ids then holds a prefix of the ids).
  Result<size_t> encode(std::string_view text, Span<int32_t> out_ids, Span<uint8_t> scratch,
                        bool add_special_tokens, ErrorContext* ctx = nullptr) const;
  // Enough ids for any text of `text_bytes` bytes: every id covers at least one byte of the
  // normalized text, plus the BOS. The normalized text is at most 3x the input under NFC and the
  // space rewrites (a space becomes the 3 bytes of "▁"), and 6x when a "▁" is prepended to every
  // segment (3 bytes more for a segment of at least one byte).
  size_t max_token_count(size_t text_bytes) const;
  // Enough scratch for any text of `text_bytes` bytes: the normalized segment (NFC and the space
  // rewrites: 3 bytes per input byte, + 3 for a prepended "▁"), then the larger of NFC's work (16
  // per input byte) and the BPE of the longest piece (28 per byte of it; a piece may be the whole
  // normalized segment), plus alignment.
  size_t encode_scratch_bytes(size_t text_bytes) const;

  // ---- Decoding (HF Tokenizer::decode(ids, skip_special_tokens)) ----

  // Writes the text of `ids` to `out` and returns its byte count: special tokens left out with
  // skip_special_tokens, the others through the desc's decoder (ByteLevel: the tokens' bytes
  // concatenated, every ill-formed UTF-8 subpart replaced by U+FFFD as Rust's
  // String::from_utf8_lossy does; the others: DecoderKind). 3 * max_token_bytes() * ids.size()
  // bytes always suffice. Errors: InvalidArgument (an id outside [0, token_count()); HF silently
  // skips those), OutOfMemory (`out` too small).
  Result<size_t> decode(Span<const int32_t> ids, Span<char> out, bool skip_special_tokens,
                        ErrorContext* ctx = nullptr) const;

  // ---- Vocabulary ----

  size_t token_count() const { return token_count_; }
  // The bytes of token `id` (< token_count()).
  Span<const uint8_t> token_bytes(uint32_t id) const {
    return Span<const uint8_t>(token_bytes_ + token_offsets_[id], token_offsets_[id + 1] - token_offsets_[id]);
  }
  size_t max_token_bytes() const { return max_token_bytes_; }
  bool is_special(uint32_t id) const { return (token_flags_[id] & kSpecial) != 0; }
  bool is_added(uint32_t id) const { return (token_flags_[id] & kAdded) != 0; }
  // The id of the added token with this content, or else of the BPE token with these bytes; -1.
  int32_t find_token(std::string_view content) const;
  bool add_bos() const { return add_bos_; }
  uint32_t bos_id() const { return bos_id_; }

 private:
  friend class StreamDecoder;
  struct MergeSlot;
  struct Segment;
  struct TextSink;
  // kByte: a "<0xNN>" token that HF's ByteFallback decoder turns into the byte NN.
  static constexpr uint8_t kSpecial = 1, kAdded = 2, kByte = 4;

  Tokenizer() = default;
  int32_t find_model_token(const uint8_t* bytes, size_t size) const;
  int32_t find_merge(uint32_t left, uint32_t right) const;  // the rank, or -1
  size_t match_added(const uint8_t* text, size_t size, size_t pos, uint32_t* id) const;
  Status encode_segment(const uint8_t* text, size_t size, bool at_text_start, Segment& out, ErrorContext* ctx) const;
  int rewrite_kind() const;
  Status encode_piece(const uint8_t* piece, size_t size, uint8_t* work, size_t work_size, Segment& out,
                      ErrorContext* ctx) const;

  const uint8_t* token_bytes_ = nullptr;
  const uint32_t* token_offsets_ = nullptr;
  size_t token_count_ = 0;
  size_t model_token_count_ = 0;
  size_t max_token_bytes_ = 0;
  const AddedTokenDesc* added_ = nullptr;
  size_t added_count_ = 0;
  PreTokenizerKind pre_tokenizer_ = PreTokenizerKind::Invalid;
  NormalizerKind normalizer_ = NormalizerKind::None;
  bool ignore_merges_ = false;
  bool add_bos_ = false;
  uint32_t bos_id_ = 0;
  bool byte_level_ = true;  // BPE symbols are bytes, not characters
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  MetaspacePrepend metaspace_prepend_ = MetaspacePrepend::Always;
  DecoderKind decoder_ = DecoderKind::ByteLevel;
  uint8_t decoder_strip_spaces_ = 0;
  // Tables in the load() allocator.
  uint8_t* token_flags_ = nullptr;     // [token_count]
  int32_t* vocab_slots_ = nullptr;     // open addressing over model token bytes: id or -1
  size_t vocab_mask_ = 0;
  MergeSlot* merge_slots_ = nullptr;   // open addressing over (left, right): rank
  size_t merge_mask_ = 0;
  uint32_t* merge_results_ = nullptr;  // [rank] -> id of the merged token
  int32_t byte_tokens_[256] = {};      // the model token of each single byte, or -1
  int32_t fallback_tokens_[256] = {};  // byte_fallback: the model token "<0xNN>" of each byte, or -1
  uint32_t* added_order_ = nullptr;    // added token indices, sorted by content bytes
  bool added_first_byte_[256] = {};    // bytes that start some added token
};

// Incremental detokenizer: push() ids one at a time and get the text they complete, so that the
// concatenation of all pieces plus flush() equals decode() of all ids. ByteLevel: a UTF-8
// character split across tokens is held back until its last byte arrives. ReplaceByteFallback: a
// run of byte tokens is held back until a token that is not one ends it (HF decides between its
// text and one U+FFFD per token only then), unless it is already ill-formed (its U+FFFDs come at
// once); a run longer than kMaxHeldBytes that is still well-formed so far gives out its complete
// characters early (decode() differs only if such a run then turns ill-formed). Every piece is
// well-formed UTF-8. Not thread-safe (one per generation stream); `tokenizer` must outlive it.
class StreamDecoder {
 public:
  static constexpr size_t kMaxHeldBytes = 256;

  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {
    reset();
  }

  // Appends the text that token `id` completes to `out` and returns its byte count (0 while
  // bytes are held back). max_push_bytes() always suffices. Errors: InvalidArgument (unknown id),
  // OutOfMemory (`out` too small); on error the decoder's state is unchanged, so the call can be
  // retried.
  Result<size_t> push(int32_t id, Span<char> out, ErrorContext* ctx = nullptr);
  // Ends the stream: held-back bytes become their text, or U+FFFD (ByteLevel: one for an
  // incomplete character; ReplaceByteFallback: one per byte token of an unfinished run).
  // max_push_bytes() always suffices. The decoder is then empty and may be reused.
  Result<size_t> flush(Span<char> out, ErrorContext* ctx = nullptr);
  void reset();
  // Bytes held back: an unfinished character (ByteLevel) or byte run (ReplaceByteFallback).
  size_t pending_bytes() const { return tail_.size + held_size_; }
  size_t max_push_bytes() const;

 private:
  // The held run's text: its bytes, or one U+FFFD per byte token when they are not well-formed.
  bool flush_run(Tokenizer::TextSink& sink);
  bool push_byte(uint8_t b, Tokenizer::TextSink& sink);

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  Utf8Tail tail_;                // ByteLevel: an unfinished character
  bool first_token_ = true;      // no token decoded yet (Metaspace drops the first token's "▁")
  uint8_t strip_left_ = 0;       // leading spaces still to drop (ReplaceByteFallback's Strip)
  bool run_ill_formed_ = false;  // the current byte run is ill-formed: each of its tokens is U+FFFD
  Utf8Validator run_check_;      // the current byte run so far
  uint16_t held_size_ = 0;
  uint8_t held_[kMaxHeldBytes + 1] = {};  // + 1: the byte that overflows it is looked at there
};

}  // namespace ember::llm
