// Byte-level BPE tokenizer, bit-compatible with Hugging Face `tokenizers` (0.22) for the Llama-3,
// Qwen2 and GPT-2 families: the same ids from encode() and the same text from decode().
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
  // Token t (t < token_count) decodes to token_bytes[token_offsets[t], token_offsets[t + 1]):
  // the raw bytes after undoing the byte-level character mapping (so a token may hold part of a
  // UTF-8 character). For an added token: what HF's ByteLevel decoder makes of its content.
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
};

class Tokenizer {
 public:
  // Bytes load() takes from its allocator for `desc`, assuming the allocator's buffer is 16-aligned.
  static size_t memory_bytes(const TokenizerDesc& desc);

  // Checks `desc` and builds the lookup tables in `allocator`. Errors: InvalidArgument (the desc is
  // inconsistent: offsets, ids, a merge whose result is not a token, duplicate tokens or added
  // tokens, ill-formed UTF-8 in an added token, an unknown pre-tokenizer; ctx says which),
  // OutOfMemory (the allocator is too small).
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
  // normalized text (at most 3x the input under NFC), plus the BOS.
  size_t max_token_count(size_t text_bytes) const;
  // Enough scratch for any text of `text_bytes` bytes: the normalized text (NFC: 3 bytes per input
  // byte), then the larger of NFC's work (16 per input byte) and the BPE of the longest piece
  // (28 per byte of it; a piece may be the whole normalized text), plus alignment.
  size_t encode_scratch_bytes(size_t text_bytes) const;

  // ---- Decoding (HF Tokenizer::decode(ids, skip_special_tokens)) ----

  // Writes the text of `ids` to `out` and returns its byte count: the tokens' bytes concatenated
  // (special tokens left out with skip_special_tokens), with every ill-formed UTF-8 subpart
  // replaced by U+FFFD as Rust's String::from_utf8_lossy does. 3 * max_token_bytes() * ids.size()
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
  static constexpr uint8_t kSpecial = 1, kAdded = 2;

  Tokenizer() = default;
  int32_t find_model_token(const uint8_t* bytes, size_t size) const;
  int32_t find_merge(uint32_t left, uint32_t right) const;  // the rank, or -1
  size_t match_added(const uint8_t* text, size_t size, size_t pos, uint32_t* id) const;
  Status encode_segment(const uint8_t* text, size_t size, Segment& out, ErrorContext* ctx) const;
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
  // Tables in the load() allocator.
  uint8_t* token_flags_ = nullptr;     // [token_count]
  int32_t* vocab_slots_ = nullptr;     // open addressing over model token bytes: id or -1
  size_t vocab_mask_ = 0;
  MergeSlot* merge_slots_ = nullptr;   // open addressing over (left, right): rank
  size_t merge_mask_ = 0;
  uint32_t* merge_results_ = nullptr;  // [rank] -> id of the merged token
  int32_t byte_tokens_[256] = {};      // the model token of each single byte, or -1
  uint32_t* added_order_ = nullptr;    // added token indices, sorted by content bytes
  bool added_first_byte_[256] = {};    // bytes that start some added token
};

// Incremental detokenizer: push() ids one at a time and get the text they complete. A UTF-8
// character split across tokens is held back until its last byte arrives, so every piece is
// well-formed UTF-8 and the concatenation of all pieces plus flush() equals decode() of all ids.
// Not thread-safe (one per generation stream); `tokenizer` must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Appends the text that token `id` completes to `out` and returns its byte count (0 while a
  // character is incomplete). max_push_bytes() always suffices. Errors: InvalidArgument (unknown
  // id), OutOfMemory (`out` too small); on error the decoder's state is unchanged, so the call
  // can be retried.
  Result<size_t> push(int32_t id, Span<char> out, ErrorContext* ctx = nullptr);
  // Ends the stream: held-back bytes of an incomplete character become one U+FFFD (at most 3
  // bytes). The decoder is then empty and may be reused.
  Result<size_t> flush(Span<char> out, ErrorContext* ctx = nullptr);
  void reset() { tail_ = Utf8Tail(); }
  size_t pending_bytes() const { return tail_.size; }
  size_t max_push_bytes() const { return 3 * (tokenizer_->max_token_bytes() + 3); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  Utf8Tail tail_;
};

}  // namespace ember::llm
