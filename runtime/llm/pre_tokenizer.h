// The pre-tokenizer regexes of byte-level BPE tokenizers, hand-implemented: Hugging Face
// `tokenizers` runs them with Oniguruma (Split(..., behavior = Isolated) or ByteLevel(use_regex)),
// and the functions here return exactly the pieces its find_iter() returns, including the
// backtracking of `\s+(?!\S)` and `\s*[\r\n]+`. No allocation; thread-safe.
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
};

// The end (a byte offset > pos) of the piece that starts at `pos` < size in text[0, size), which
// must be valid UTF-8. Pieces tile the text: the next one starts where this one ends.
size_t next_pre_token(PreTokenizerKind kind, const uint8_t* text, size_t size, size_t pos);

}  // namespace ember::llm
