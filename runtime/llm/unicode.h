// Unicode helpers of the tokenizer: UTF-8 decoding and encoding, the character classes of the
// pre-tokenizer regexes, NFC, and lossy UTF-8 repair. Internal to runtime/llm (the tests use it).
// Nothing here allocates; every function is thread-safe (the tables are constant).
//
// Versions (scripts/gen_unicode_tables.py has the details): the classes are Unicode 16.0 (HF
// tokenizers' Oniguruma), is_numeric_char is 17.0 (the Rust standard library HF was built with),
// NFC is Unicode 9.0 (HF's unicode-normalization-alignments tables).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::llm {

constexpr uint32_t kReplacementCharacter = 0xFFFD;

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence (overlongs,
// surrogates, code points above U+10FFFF and truncated sequences are ill-formed), or `size` when
// all of data[0, size) is valid.
size_t find_invalid_utf8(const uint8_t* data, size_t size);
// Checks a byte stream for well-formed UTF-8 one byte at a time, without keeping the bytes (HF's
// ByteFallback decoder turns a run of byte tokens into text only when the whole run is
// well-formed). Trivially copyable.
class Utf8Validator {
 public:
  void push(uint8_t b);
  // Well-formed so far; the last character may be unfinished.
  bool is_prefix() const { return ok_; }
  // Well-formed, with no unfinished character.
  bool is_complete() const { return ok_ && pending_ == 0; }

 private:
  bool ok_ = true;
  uint8_t pending_ = 0;  // continuation bytes still expected
  uint8_t lo_ = 0x80;    // the range of the next one
  uint8_t hi_ = 0xBF;
};

// Decodes the code point at `p`, which must start a well-formed sequence that ends before the end
// of the buffer (validate first); *length receives its byte count (1..4).
inline uint32_t decode_utf8(const uint8_t* p, size_t* length) {
  const uint32_t b0 = p[0];
  if (b0 < 0x80) {
    *length = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *length = 2;
    return ((b0 & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b0 < 0xF0) {
    *length = 3;
    return ((b0 & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *length = 4;
  return ((b0 & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

// Writes the UTF-8 form of `cp` (a scalar value) to out[0, 4); returns its byte count.
size_t encode_utf8(uint32_t cp, uint8_t* out);

// Character classes of the pre-tokenizer regexes, as a bit mask.
enum CharClassBits : uint8_t {
  kClassLetter = 1,      // \p{L}
  kClassNumber = 2,      // \p{N}
  kClassWhiteSpace = 4,  // \s (White_Space)
};
uint8_t char_class(uint32_t cp);

// Rust's char::is_numeric (General_Category N of Unicode 17.0), which HF's Digits pre-tokenizer
// splits with: \p{N} of char_class plus the numbers Unicode 17.0 added.
bool is_numeric_char(uint32_t cp);

// Canonical combining class (0 for starters and for code points unknown to Unicode 9.0).
uint8_t combining_class(uint32_t cp);

// ---- NFC (Unicode 9.0 tables; the algorithm of UAX #15 with algorithmic Hangul) ----

// Text whose code points are all below this is NFC already (checked by the table generator).
constexpr uint32_t kNfcQuickLimit = 0x300;
// NFC output is at most this many times the input's UTF-8 byte count (checked by the generator).
constexpr size_t kNfcMaxExpansion = 3;
// Work memory normalize_nfc needs for `size` input bytes: the decomposed code points (at most 2
// per input byte) and as many again for sorting long runs of combining marks.
constexpr size_t nfc_work_count(size_t size) { return 4 * size; }

// True if normalize_nfc would return its input unchanged because no code point reaches
// kNfcQuickLimit (a fast pre-check; false does not mean the text changes).
bool is_nfc_quick(const uint8_t* text, size_t size);

// Writes NFC(text) to `out` (capacity at least kNfcMaxExpansion * size) and returns its byte
// count. `text` must be valid UTF-8; `work` holds nfc_work_count(size) uint32_t.
size_t normalize_nfc(const uint8_t* text, size_t size, uint8_t* out, uint32_t* work);

// ---- Lossy UTF-8 (U+FFFD substitution of maximal subparts, Unicode §3.9 / Rust's
// String::from_utf8_lossy, which HF's ByteLevel decoder applies to the whole decoded byte string) ----

// The incomplete tail of a byte stream: at most 3 bytes that are a proper prefix of a well-formed
// sequence. Trivially copyable, so a caller can try an append and keep the old state on failure.
struct Utf8Tail {
  uint8_t bytes[3] = {0, 0, 0};
  uint8_t size = 0;
};

// Appends bytes[0, size), repaired, to out[*written, capacity): complete well-formed sequences are
// copied, each maximal ill-formed subpart becomes U+FFFD, and an incomplete trailing sequence stays
// in `tail` for the next call. Returns false (out and *written partly written, `tail` undefined)
// when out is too small; 3 * (tail.size + size) bytes always suffice.
bool append_lossy_utf8(Utf8Tail& tail, const uint8_t* bytes, size_t size, uint8_t* out, size_t capacity,
                       size_t* written);
// Ends the stream: an incomplete tail becomes one U+FFFD. Same return contract (needs <= 3 bytes).
bool flush_lossy_utf8(Utf8Tail& tail, uint8_t* out, size_t capacity, size_t* written);

}  // namespace ember::llm
