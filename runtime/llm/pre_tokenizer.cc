// Each function below is one regex, matched at `pos` the way Oniguruma does it: the alternatives
// are tried in order and the first that matches wins (not the longest), with greedy quantifiers
// that backtrack. Every alternative consumes at least one character and together they cover every
// character, so find_iter() never leaves a gap and the pieces tile the text.
#include "runtime/llm/pre_tokenizer.h"

#include "runtime/llm/unicode.h"

namespace ember::llm {
namespace {

struct Char {
  uint32_t cp;
  size_t end;  // byte offset just past it
  uint8_t cls;
};

Char char_at(const uint8_t* text, size_t pos) {
  size_t length = 0;
  const uint32_t cp = decode_utf8(text + pos, &length);
  return {cp, pos + length, char_class(cp)};
}

bool is_letter(const Char& c) { return (c.cls & kClassLetter) != 0; }
bool is_number(const Char& c) { return (c.cls & kClassNumber) != 0; }
bool is_space(const Char& c) { return (c.cls & kClassWhiteSpace) != 0; }
// [^\s\p{L}\p{N}]
bool is_other(const Char& c) { return c.cls == 0; }
bool is_cr_or_lf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// Advances over the characters for which `pred` holds, from `pos`.
template <typename Pred>
size_t skip_while(const uint8_t* text, size_t size, size_t pos, Pred pred) {
  while (pos < size) {
    const Char c = char_at(text, pos);
    if (!pred(c)) break;
    pos = c.end;
  }
  return pos;
}

// Case-folds an ASCII letter or U+017F LATIN SMALL LETTER LONG S, which Oniguruma's
// case-insensitive matching equates with 's' (CaseFolding.txt: 017F -> 0073). No other code point
// folds to one of the letters the contractions use (s t r e v m l d).
uint32_t fold(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
  if (cp == 0x017F) return 's';
  return cp;
}

// The contractions 's 't 're 've 'm 'll 'd after an apostrophe at text[pos - 1]; returns the end
// of the match or 0. Case-insensitive for Llama-3 / Qwen2 ((?i:...)), exact for GPT-2.
size_t match_contraction(const uint8_t* text, size_t size, size_t pos, bool ignore_case) {
  if (pos >= size) return 0;
  const Char a = char_at(text, pos);
  const uint32_t fa = ignore_case ? fold(a.cp) : a.cp;
  if (fa == 's' || fa == 't' || fa == 'm' || fa == 'd') return a.end;
  if (fa != 'r' && fa != 'v' && fa != 'l') return 0;
  if (a.end >= size) return 0;
  const Char b = char_at(text, a.end);
  const uint32_t fb = ignore_case ? fold(b.cp) : b.cp;
  if ((fa == 'r' || fa == 'v') && fb == 'e') return b.end;
  if (fa == 'l' && fb == 'l') return b.end;
  return 0;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t next_llama3(const uint8_t* text, size_t size, size_t pos, int max_digits) {
  const Char c0 = char_at(text, pos);
  if (c0.cp == '\'') {
    if (const size_t end = match_contraction(text, size, c0.end, /*ignore_case=*/true)) return end;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+ : an optional non-letter/number/newline prefix, then letters.
  if (is_letter(c0)) return skip_while(text, size, c0.end, is_letter);
  if (!is_number(c0) && !is_cr_or_lf(c0.cp) && c0.end < size) {
    const Char c1 = char_at(text, c0.end);
    if (is_letter(c1)) return skip_while(text, size, c1.end, is_letter);
  }
  // \p{N}{1,3} (Qwen2: \p{N})
  if (is_number(c0)) {
    size_t end = c0.end;
    for (int count = 1; count < max_digits && end < size; ++count) {
      const Char c = char_at(text, end);
      if (!is_number(c)) break;
      end = c.end;
    }
    return end;
  }
  // ' '?[^\s\p{L}\p{N}]+[\r\n]* : only U+0020 may prefix; trailing CR/LF are absorbed.
  size_t start = pos;
  if (c0.cp == ' ' && c0.end < size && is_other(char_at(text, c0.end))) start = c0.end;
  if (start != pos || is_other(c0)) {
    size_t end = skip_while(text, size, start, is_other);
    while (end < size && is_cr_or_lf(text[end])) ++end;
    return end;
  }
  // c0 is white space. Measure the run of white space [pos, run_end), the end of its last CR/LF
  // and the start of its last character.
  size_t run_end = pos, newline_end = 0, last_start = pos;
  while (run_end < size) {
    const Char c = char_at(text, run_end);
    if (!is_space(c)) break;
    if (is_cr_or_lf(c.cp)) newline_end = c.end;
    last_start = run_end;
    run_end = c.end;
  }
  // \s*[\r\n]+ : \s* first takes the whole run, then gives back characters until [\r\n]+ can
  // match, so the piece ends just after the run's LAST CR/LF ("  \n\n  x" -> "  \n\n", " ", " x").
  if (newline_end != 0) return newline_end;
  // \s+(?!\S) : the whole run at the end of the text; otherwise the run minus its last character
  // (that one is left to prefix the next word, e.g. "a   b" -> "a", "  ", " b").
  if (run_end == size) return run_end;
  if (last_start > pos) return last_start;
  // \s+ : a single white-space character before a non-space that no alternative above took.
  return run_end;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t next_gpt2(const uint8_t* text, size_t size, size_t pos) {
  const Char c0 = char_at(text, pos);
  if (c0.cp == '\'') {
    if (const size_t end = match_contraction(text, size, c0.end, /*ignore_case=*/false)) return end;
  }
  bool (*const classes[])(const Char&) = {is_letter, is_number, is_other};
  for (auto* in_class : classes) {
    if (in_class(c0)) return skip_while(text, size, c0.end, in_class);
    if (c0.cp == ' ' && c0.end < size) {
      const Char c1 = char_at(text, c0.end);
      if (in_class(c1)) return skip_while(text, size, c1.end, in_class);
    }
  }
  size_t run_end = pos, last_start = pos;
  while (run_end < size) {
    const Char c = char_at(text, run_end);
    if (!is_space(c)) break;
    last_start = run_end;
    run_end = c.end;
  }
  if (run_end == size) return run_end;        // \s+(?!\S) at the end of the text
  if (last_start > pos) return last_start;    // \s+(?!\S): all but the last character
  return run_end;                             // \s+
}

// HF Digits(individual_digits = true), which splits with SplitDelimiterBehavior::Isolated on
// char::is_numeric: a numeric character alone, or the run of characters up to the next one.
size_t next_digits_piece(const uint8_t* text, size_t size, size_t pos) {
  const Char c0 = char_at(text, pos);
  if (is_numeric_char(c0.cp)) return c0.end;
  return skip_while(text, size, c0.end, [](const Char& c) { return !is_numeric_char(c.cp); });
}

// "▁" (U+2581) in UTF-8.
constexpr uint8_t kMetaspace[3] = {0xE2, 0x96, 0x81};

// The next "▁" at or after `pos`, or `size`.
size_t find_metaspace(const uint8_t* text, size_t size, size_t pos) {
  for (; pos + 3 <= size; ++pos) {
    if (text[pos] == kMetaspace[0] && text[pos + 1] == kMetaspace[1] && text[pos + 2] == kMetaspace[2]) return pos;
  }
  return size;
}

}  // namespace

size_t next_pre_token(PreTokenizerKind kind, const uint8_t* text, size_t size, size_t pos) {
  switch (kind) {
    case PreTokenizerKind::Llama3:
      return next_llama3(text, size, pos, 3);
    case PreTokenizerKind::Qwen2:
      return next_llama3(text, size, pos, 1);
    case PreTokenizerKind::Gpt2:
      return next_gpt2(text, size, pos);
    default:
      break;
  }
  return size;
}

bool PreTokenCursor::next(size_t* begin, size_t* end) {
  if (pos_ >= size_) return false;
  *begin = pos_;
  switch (kind_) {
    case PreTokenizerKind::Gpt2Digits:
      // The GPT-2 regex runs on each Digits piece separately: its end is the end of the text for
      // \s+(?!\S).
      if (pos_ >= digits_end_) digits_end_ = next_digits_piece(text_, size_, pos_);
      pos_ = next_gpt2(text_, digits_end_, pos_);
      break;
    case PreTokenizerKind::MetaspaceSplit:
      // MergedWithNext: every "▁" starts a piece (the text before the first one is a piece too).
      pos_ = find_metaspace(text_, size_, find_metaspace(text_, size_, pos_) == pos_ ? pos_ + 3 : pos_ + 1);
      break;
    default:
      pos_ = next_pre_token(kind_, text_, size_, pos_);
      break;
  }
  *end = pos_;
  return true;
}

}  // namespace ember::llm
