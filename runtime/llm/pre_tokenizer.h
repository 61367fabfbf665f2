// The pre-tokenizers: the split regexes of byte-level BPE tokenizers, hand-implemented (Hugging Face
// `tokenizers` runs them with Oniguruma: Split(..., behavior = Isolated) or ByteLevel(use_regex)),
// the functions here returning exactly the pieces its find_iter() returns, including the
// backtracking of `\s+(?!\S)` and `\s*[\r\n]+`; HF's Digits split in front of the GPT-2 regex
// (SmolLM); and the SentencePiece layouts' whole-segment and Metaspace splits. No allocation;
// thread-safe (a PreTokenCursor is one caller's).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::llm {

enum class PreTokenizerKind : uint8_t {
  Invalid = 0,
  // Llama-3 (tiktoken cl100k):
  //   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  //   \s*[\r\n]+|\s+(?!\S)|\s+
  Llama3 = 1,
  // Qwen2: the same with \p{N} (one digit per piece) instead of \p{N}{1,3}.
  Qwen2 = 2,
  // GPT-2 (HF ByteLevel with use_regex = true):
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2 = 3,
  // SmolLM / StarCoder: Sequence[Digits(individual_digits = true), ByteLevel(use_regex = true)]:
  // every numeric character (is_numeric_char: Rust's char::is_numeric) is a piece of its own, and
  // the GPT-2 regex splits the text between them.
  Gpt2Digits = 4,
  // Not byte-level (SentencePiece layouts; the Tokenizer rewrites spaces to U+2581 "▁" first):
  // no split, the whole segment is one piece (Llama-2 and Gemma: no pre-tokenizer).
  Whole = 5,
  // HF Metaspace(replacement "▁", split = false): one piece, like Whole; the Tokenizer applies
  // its space rewrite and prepend scheme (TokenizerDesc::metaspace_prepend) first.
  Metaspace = 6,
  // HF Metaspace(split = true): a piece starts at every "▁" (SplitDelimiterBehavior::MergedWithNext).
  MetaspaceSplit = 7,
};

// True for the kinds whose BPE runs on bytes (a ByteLevel step), false for the SentencePiece ones
// (Whole, Metaspace, MetaspaceSplit), whose BPE runs on characters.
constexpr bool is_byte_level(PreTokenizerKind kind) {
  return kind == PreTokenizerKind::Llama3 || kind == PreTokenizerKind::Qwen2 || kind == PreTokenizerKind::Gpt2 ||
         kind == PreTokenizerKind::Gpt2Digits;
}

// The end (a byte offset > pos) of the piece that starts at `pos` < size in text[0, size), which
// must be valid UTF-8, for the regex kinds Llama3, Qwen2 and Gpt2 (any other kind: `size`).
// Pieces tile the text: the next one starts where this one ends.
size_t next_pre_token(PreTokenizerKind kind, const uint8_t* text, size_t size, size_t pos);

// The pieces of any kind, in order, in linear time:
//   PreTokenCursor cursor(kind, text, size);
//   for (size_t begin, end; cursor.next(&begin, &end);) { ... text[begin, end) ... }
// `text` (valid UTF-8) must outlive the cursor.
class PreTokenCursor {
 public:
  PreTokenCursor(PreTokenizerKind kind, const uint8_t* text, size_t size) : kind_(kind), text_(text), size_(size) {}
  // The next piece [*begin, *end), non-empty; false after the last one.
  bool next(size_t* begin, size_t* end);

 private:
  PreTokenizerKind kind_;
  const uint8_t* text_;
  size_t size_;
  size_t pos_ = 0;
  size_t digits_end_ = 0;  // Gpt2Digits: the end of the current Digits piece
};

}  // namespace ember::llm
