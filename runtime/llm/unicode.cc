#include "runtime/llm/unicode.h"

#include "runtime/llm/unicode_tables.h"

namespace ember::llm {
namespace {

// Hangul syllable arithmetic (Unicode §3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// The range of the second byte of a sequence, which depends on the lead (Unicode Table 3-7): it
// excludes overlongs (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
struct LeadInfo {
  uint8_t length;  // 0: not a lead byte
  uint8_t lo, hi;  // allowed range of the second byte
};
LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};  // continuation byte, or C0/C1 (always overlong)
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};  // F5..FF
}

bool in_ranges(const CodePointRange* ranges, size_t count, uint32_t cp) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (ranges[mid].last < cp) {
      lo = mid + 1;
    } else if (ranges[mid].first > cp) {
      hi = mid;
    } else {
      return true;
    }
  }
  return false;
}

// Classes of U+0000..U+00FF, computed once from the tables (constant-initialized below).
struct Latin1Classes {
  uint8_t bits[256];
};
Latin1Classes make_latin1_classes() {
  Latin1Classes t{};
  for (uint32_t c = 0; c < 256; ++c) {
    t.bits[c] = static_cast<uint8_t>((in_ranges(kLetterRanges, kLetterRangeCount, c) ? kClassLetter : 0) |
                                     (in_ranges(kNumberRanges, kNumberRangeCount, c) ? kClassNumber : 0) |
                                     (in_ranges(kWhiteSpaceRanges, kWhiteSpaceRangeCount, c) ? kClassWhiteSpace : 0));
  }
  return t;
}

const Decomposition* find_decomposition(uint32_t cp) {
  size_t lo = 0, hi = kDecompositionCount;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (kDecompositions[mid].code_point < cp) {
      lo = mid + 1;
    } else if (kDecompositions[mid].code_point > cp) {
      hi = mid;
    } else {
      return &kDecompositions[mid];
    }
  }
  return nullptr;
}

// Appends the full canonical decomposition of cp to out[*n ...]. Depth is at most 4.
void decompose(uint32_t cp, uint32_t* out, size_t* n) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out[(*n)++] = kLBase + s / kNCount;
    out[(*n)++] = kVBase + (s % kNCount) / kTCount;
    if (s % kTCount != 0) out[(*n)++] = kTBase + s % kTCount;
    return;
  }
  const Decomposition* d = cp >= 0xC0 ? find_decomposition(cp) : nullptr;
  if (d == nullptr) {
    out[(*n)++] = cp;
    return;
  }
  decompose(d->first, out, n);
  if (d->second != 0) decompose(d->second, out, n);
}

// The primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  // LV + T; U+11A7 (kTBase itself) is not a trailing consonant.
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  size_t lo = 0, hi = kCompositionCount;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const Composition& c = kCompositions[mid];
    if (c.first < a || (c.first == a && c.second < b)) {
      lo = mid + 1;
    } else if (c.first == a && c.second == b) {
      return c.composite;
    } else {
      hi = mid;
    }
  }
  return 0;
}

// Stable sort of cps[0, n) by combining class (all > 0). Short runs (the usual case: one to three
// marks) use insertion sort; long ones a counting sort through `tmp`, so hostile input stays O(n).
void sort_marks(uint32_t* cps, size_t n, uint32_t* tmp) {
  if (n <= 16) {
    for (size_t i = 1; i < n; ++i) {
      const uint32_t c = cps[i];
      const uint8_t k = combining_class(c);
      size_t j = i;
      while (j > 0 && combining_class(cps[j - 1]) > k) {
        cps[j] = cps[j - 1];
        --j;
      }
      cps[j] = c;
    }
    return;
  }
  size_t count[257] = {0};
  for (size_t i = 0; i < n; ++i) ++count[combining_class(cps[i]) + 1];
  for (size_t k = 1; k < 257; ++k) count[k] += count[k - 1];
  for (size_t i = 0; i < n; ++i) tmp[count[combining_class(cps[i])]++] = cps[i];
  for (size_t i = 0; i < n; ++i) cps[i] = tmp[i];
}

}  // namespace

size_t find_invalid_utf8(const uint8_t* data, size_t size) {
  size_t i = 0;
  while (i < size) {
    if (data[i] < 0x80) {
      ++i;
      continue;
    }
    const LeadInfo info = lead_info(data[i]);
    if (info.length == 0 || i + info.length > size) return i;
    if (data[i + 1] < info.lo || data[i + 1] > info.hi) return i;
    for (size_t k = 2; k < info.length; ++k) {
      if ((data[i + k] & 0xC0) != 0x80) return i;
    }
    i += info.length;
  }
  return size;
}

void Utf8Validator::push(uint8_t b) {
  if (!ok_) return;
  if (pending_ == 0) {
    const LeadInfo info = lead_info(b);
    if (info.length == 0) {
      ok_ = false;
    } else if (info.length > 1) {
      pending_ = static_cast<uint8_t>(info.length - 1);
      lo_ = info.lo;
      hi_ = info.hi;
    }
    return;
  }
  if (b < lo_ || b > hi_) {
    ok_ = false;
    return;
  }
  --pending_;
  lo_ = 0x80;
  hi_ = 0xBF;
}

size_t encode_utf8(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

uint8_t char_class(uint32_t cp) {
  // A function-local constant: initialized once, thread-safely, without heap.
  static const Latin1Classes latin1 = make_latin1_classes();
  if (cp < 256) return latin1.bits[cp];
  uint8_t bits = 0;
  if (in_ranges(kLetterRanges, kLetterRangeCount, cp)) {
    bits |= kClassLetter;
  } else if (in_ranges(kNumberRanges, kNumberRangeCount, cp)) {
    bits |= kClassNumber;
  } else if (in_ranges(kWhiteSpaceRanges, kWhiteSpaceRangeCount, cp)) {
    bits |= kClassWhiteSpace;
  }
  return bits;
}

bool is_numeric_char(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return (char_class(cp) & kClassNumber) != 0 || in_ranges(kNumericExtraRanges, kNumericExtraRangeCount, cp);
}

uint8_t combining_class(uint32_t cp) {
  if (cp < kNfcQuickLimit) return 0;
  size_t lo = 0, hi = kCombiningClassRangeCount;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (kCombiningClassRanges[mid].last < cp) {
      lo = mid + 1;
    } else if (kCombiningClassRanges[mid].first > cp) {
      hi = mid;
    } else {
      return static_cast<uint8_t>(kCombiningClassRanges[mid].ccc);
    }
  }
  return 0;
}

bool is_nfc_quick(const uint8_t* text, size_t size) {
  // U+0300 is the first code point whose UTF-8 lead byte is >= 0xCC.
  for (size_t i = 0; i < size; ++i) {
    if (text[i] >= 0xCC) return false;
  }
  return true;
}

size_t normalize_nfc(const uint8_t* text, size_t size, uint8_t* out, uint32_t* work) {
  // 1. Full canonical decomposition (at most 2 code points per input byte).
  uint32_t* cps = work;
  uint32_t* tmp = work + 2 * size;
  size_t n = 0;
  for (size_t i = 0; i < size;) {
    size_t length = 0;
    const uint32_t cp = decode_utf8(text + i, &length);
    decompose(cp, cps, &n);
    i += length;
  }
  // 2. Canonical ordering: each maximal run of non-starters, stably sorted by combining class.
  for (size_t i = 0; i < n;) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < n && combining_class(cps[j]) != 0) ++j;
    if (j - i > 1) sort_marks(cps + i, j - i, tmp);
    i = j;
  }
  // 3. Canonical composition, in place. A character C composes with the last starter S unless it
  // is blocked: some character between them (left uncomposed) has class 0 or a class >= C's.
  // The run is sorted, so the last uncomposed character has the largest class of those between.
  size_t kept = 0;
  ptrdiff_t starter = -1;
  uint8_t last_class = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t c = cps[i];
    const uint8_t k = combining_class(c);
    if (starter >= 0) {
      const bool adjacent = static_cast<ptrdiff_t>(kept) - 1 == starter;
      if (adjacent || (last_class != 0 && last_class < k)) {
        const uint32_t composite = compose(cps[starter], c);
        if (composite != 0) {
          cps[starter] = composite;
          continue;
        }
      }
    }
    if (k == 0) starter = static_cast<ptrdiff_t>(kept);
    cps[kept++] = c;
    last_class = k;
  }
  // 4. Back to UTF-8.
  size_t written = 0;
  for (size_t i = 0; i < kept; ++i) written += encode_utf8(cps[i], out + written);
  return written;
}

bool append_lossy_utf8(Utf8Tail& tail, const uint8_t* bytes, size_t size, uint8_t* out, size_t capacity,
                       size_t* written) {
  static constexpr uint8_t kFffd[3] = {0xEF, 0xBF, 0xBD};
  size_t w = *written;
  auto put = [&](const uint8_t* p, size_t count) {
    if (capacity - w < count) return false;
    for (size_t k = 0; k < count; ++k) out[w + k] = p[k];
    w += count;
    return true;
  };
  for (size_t i = 0; i < size;) {
    const uint8_t b = bytes[i];
    if (tail.size == 0) {
      const LeadInfo info = lead_info(b);
      if (info.length == 1) {
        if (!put(&b, 1)) return false;
      } else if (info.length == 0) {
        if (!put(kFffd, 3)) return false;  // a stray continuation byte or an invalid lead
      } else {
        tail.bytes[0] = b;
        tail.size = 1;
      }
      ++i;
      continue;
    }
    const LeadInfo info = lead_info(tail.bytes[0]);
    const uint8_t lo = tail.size == 1 ? info.lo : 0x80;
    const uint8_t hi = tail.size == 1 ? info.hi : 0xBF;
    if (b < lo || b > hi) {
      // The pending bytes are a maximal subpart: one U+FFFD; `b` is looked at again as a lead.
      if (!put(kFffd, 3)) return false;
      tail.size = 0;
      continue;
    }
    if (tail.size + 1u == info.length) {
      if (!put(tail.bytes, tail.size) || !put(&b, 1)) return false;
      tail.size = 0;
    } else {
      tail.bytes[tail.size++] = b;
    }
    ++i;
  }
  *written = w;
  return true;
}

bool flush_lossy_utf8(Utf8Tail& tail, uint8_t* out, size_t capacity, size_t* written) {
  if (tail.size == 0) return true;
  if (capacity - *written < 3) return false;
  out[(*written)++] = 0xEF;
  out[(*written)++] = 0xBF;
  out[(*written)++] = 0xBD;
  tail.size = 0;
  return true;
}

}  // namespace ember::llm
