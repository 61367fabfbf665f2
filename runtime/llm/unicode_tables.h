// The Unicode data of the tokenizer, generated into unicode_tables.cc by
// scripts/gen_unicode_tables.py (which says where each table comes from and which Unicode version
// it reproduces). Every table is sorted by its first field, for binary search.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::llm {

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

struct CombiningClassRange {
  uint32_t first;
  uint32_t last;  // inclusive; every code point of the range has `ccc`
  uint32_t ccc;   // canonical combining class, 1..254 (code points not listed have 0)
};

// One level of a canonical decomposition: code_point -> first (+ second); second == 0 for a
// singleton. Hangul syllables are algorithmic and not listed.
struct Decomposition {
  uint32_t code_point;
  uint32_t first;
  uint32_t second;
};

// A primary composite: (first, second) -> composite, sorted by (first, second).
struct Composition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};

extern const CodePointRange kLetterRanges[];  // \p{L}: Lu Ll Lt Lm Lo
extern const size_t kLetterRangeCount;
extern const CodePointRange kNumberRanges[];  // \p{N}: Nd Nl No
extern const size_t kNumberRangeCount;
extern const CodePointRange kNumericExtraRanges[];  // Rust char::is_numeric (17.0) beyond kNumberRanges
extern const size_t kNumericExtraRangeCount;
extern const CodePointRange kWhiteSpaceRanges[];  // \s: White_Space
extern const size_t kWhiteSpaceRangeCount;
extern const CombiningClassRange kCombiningClassRanges[];
extern const size_t kCombiningClassRangeCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

}  // namespace ember::llm
