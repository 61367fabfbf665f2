// The HF `tokenizers` pipeline, step by step (tokenizers 0.22, src/tokenizer/mod.rs and
// src/models/bpe/): AddedVocabulary::extract_and_normalize splits out added tokens, the normalizer
// and pre-tokenizer run on each remaining segment, BPE::tokenize runs on each piece, then the
// post-processor adds the BOS. Comments cite the HF behaviour each step reproduces.
#include "runtime/llm/tokenizer.h"

#include <algorithm>
#include <cstring>

namespace ember::llm {

struct Tokenizer::MergeSlot {
  uint32_t left;
  uint32_t right;
  int32_t rank;  // -1: empty
};

// Where encode() writes: the caller's ids and scratch.
struct Tokenizer::Segment {
  int32_t* ids;
  size_t capacity;
  size_t count;
  uint8_t* scratch;
  size_t scratch_size;
  size_t text_bytes;  // of the whole input, for error messages
};

// Where decoded text goes: out[*written, capacity), after HF's Strip(" ", n, 0) took the first
// `strip_left` spaces of the whole text.
struct Tokenizer::TextSink {
  uint8_t* out;
  size_t capacity;
  size_t written;
  uint8_t strip_left;

  bool put(uint8_t b) {
    if (strip_left > 0) {
      if (b == ' ') {
        --strip_left;
        return true;
      }
      strip_left = 0;
    }
    if (written == capacity) return false;
    out[written++] = b;
    return true;
  }
  bool put_replacement() { return put(0xEF) && put(0xBF) && put(0xBD); }
  // A token string with every "▁" (E2 96 81) as a space, or dropped (HF's Metaspace decoder on
  // the first token).
  bool put_text(Span<const uint8_t> s, bool drop_metaspace) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 3 <= s.size() && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
        i += 2;
        if (!drop_metaspace && !put(' ')) return false;
      } else if (!put(s[i])) {
        return false;
      }
    }
    return true;
  }
};

namespace {

constexpr size_t kAlign = 16;
size_t align_up(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// FNV-1a, 64-bit; continued over several pieces so a merge's result can be looked up without
// concatenating its two halves.
uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xCBF29CE484222325ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}
uint64_t mix_pair(uint32_t a, uint32_t b) {  // splitmix64 finalizer
  uint64_t x = (static_cast<uint64_t>(a) << 32) | b;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Open-addressing tables: a power of two at most 3/4 full (Llama-3's 280k merges: 512Ki slots).
size_t table_capacity(size_t entries) {
  size_t cap = 16;
  while (cap < entries + entries / 3 + 1) cap *= 2;
  return cap;
}

// BPE state of one piece (HF src/models/bpe/word.rs): a doubly linked list over the symbols, a
// removed symbol has id -1 (HF: len == 0).
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
};
// A candidate merge of symbols[pos] with its next symbol. HF's BinaryHeap<Merge> pops the lowest
// rank first and, among equal ranks, the lowest position.
struct HeapEntry {
  uint32_t rank;
  uint32_t pos;
};
bool before(const HeapEntry& a, const HeapEntry& b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }
void heap_push(HeapEntry* heap, size_t* size, HeapEntry e) {
  size_t i = (*size)++;
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!before(e, heap[parent])) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = e;
}
HeapEntry heap_pop(HeapEntry* heap, size_t* size) {
  const HeapEntry top = heap[0];
  const HeapEntry last = heap[--(*size)];
  size_t i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= *size) break;
    if (child + 1 < *size && before(heap[child + 1], heap[child])) ++child;
    if (!before(heap[child], last)) break;
    heap[i] = heap[child];
    i = child;
  }
  if (*size > 0) heap[i] = last;
  return top;
}

// The BPE work memory of a piece of `size` bytes: its symbols and a heap that never holds more
// than 2 * symbols entries (each pop that merges pushes at most two).
size_t piece_work_bytes(size_t size) { return align_up(size * sizeof(Symbol)) + 2 * size * sizeof(HeapEntry); }

// The byte a token string stands for in HF's ByteFallback decoder, or -1: six bytes "<0x..>"
// whose middle two u8::from_str_radix(_, 16) accepts (two hex digits, or '+' and one).
int hex_digit(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
int byte_token_value(Span<const uint8_t> s) {
  if (s.size() != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
  const int lo = hex_digit(s[4]);
  if (lo < 0) return -1;
  if (s[3] == '+') return lo;
  const int hi = hex_digit(s[3]);
  return hi < 0 ? -1 : hi * 16 + lo;
}

Status too_small(ErrorContext* ctx, const char* what, size_t have, size_t need) {
  return EMBER_FAIL(ctx, Error::OutOfMemory, "tokenizer: %s holds %zu, needs at least %zu", what, have, need);
}

}  // namespace

size_t Tokenizer::memory_bytes(const TokenizerDesc& desc) {
  // The allocations of load(), in order, each 16-aligned; plus 16 for an unaligned buffer start.
  const size_t tokens = desc.token_offsets.empty() ? 0 : desc.token_offsets.size() - 1;
  return align_up(tokens) + align_up(table_capacity(desc.model_token_count) * sizeof(int32_t)) +
         align_up(table_capacity(desc.merges.size()) * sizeof(MergeSlot)) +
         align_up((desc.merges.size() + 1) * sizeof(uint32_t)) +
         align_up((desc.added_tokens.size() + 1) * sizeof(uint32_t)) + kAlign;
}

Result<Tokenizer> Tokenizer::load(const TokenizerDesc& desc, BumpAllocator& allocator, ErrorContext* ctx) {
  const Error bad = Error::InvalidArgument;
  if (desc.pre_tokenizer == PreTokenizerKind::Invalid || desc.pre_tokenizer > PreTokenizerKind::MetaspaceSplit) {
    return EMBER_FAIL(ctx, bad, "tokenizer: unknown pre-tokenizer kind %d", static_cast<int>(desc.pre_tokenizer));
  }
  if (desc.normalizer > NormalizerKind::PrependReplace) {
    return EMBER_FAIL(ctx, bad, "tokenizer: unknown normalizer kind %d", static_cast<int>(desc.normalizer));
  }
  if (desc.decoder > DecoderKind::MetaspaceNever || desc.metaspace_prepend > MetaspacePrepend::Never) {
    return EMBER_FAIL(ctx, bad, "tokenizer: unknown decoder kind %d or Metaspace prepend scheme %d",
                      static_cast<int>(desc.decoder), static_cast<int>(desc.metaspace_prepend));
  }
  // The combinations the layouts use; the others would need more than one rewrite of a segment
  // (or bytes that are not characters) and are refused rather than half supported.
  const bool byte_level = is_byte_level(desc.pre_tokenizer);
  const bool metaspace =
      desc.pre_tokenizer == PreTokenizerKind::Metaspace || desc.pre_tokenizer == PreTokenizerKind::MetaspaceSplit;
  if ((desc.decoder == DecoderKind::ByteLevel) != byte_level) {
    return EMBER_FAIL(ctx, bad, "tokenizer: decoder kind %d does not fit pre-tokenizer kind %d (the ByteLevel decoder "
                      "goes with exactly the byte-level pre-tokenizers)", static_cast<int>(desc.decoder),
                      static_cast<int>(desc.pre_tokenizer));
  }
  if (byte_level && desc.byte_fallback) {
    return EMBER_FAIL(ctx, bad, "tokenizer: byte_fallback needs a pre-tokenizer that is not byte-level (kind %d is)",
                      static_cast<int>(desc.pre_tokenizer));
  }
  if (byte_level && (desc.normalizer == NormalizerKind::Replace || desc.normalizer == NormalizerKind::PrependReplace)) {
    return EMBER_FAIL(ctx, bad, "tokenizer: normalizer kind %d needs a pre-tokenizer that is not byte-level (kind %d is)",
                      static_cast<int>(desc.normalizer), static_cast<int>(desc.pre_tokenizer));
  }
  if (metaspace && desc.normalizer != NormalizerKind::None) {
    return EMBER_FAIL(ctx, bad, "tokenizer: the Metaspace pre-tokenizer (kind %d) runs without a normalizer (kind %d)",
                      static_cast<int>(desc.pre_tokenizer), static_cast<int>(desc.normalizer));
  }
  if (desc.decoder_strip_spaces != 0 && desc.decoder != DecoderKind::ReplaceByteFallback) {
    return EMBER_FAIL(ctx, bad, "tokenizer: decoder_strip_spaces %u needs the ReplaceByteFallback decoder",
                      static_cast<unsigned>(desc.decoder_strip_spaces));
  }
  if (desc.unk_id < -1 || (desc.unk_id >= 0 && static_cast<uint32_t>(desc.unk_id) >= desc.model_token_count)) {
    return EMBER_FAIL(ctx, bad, "tokenizer: unk_id %d is not a BPE token (%u)", desc.unk_id, desc.model_token_count);
  }
  if (desc.token_offsets.size() < 2 || desc.token_offsets[0] != 0 ||
      desc.token_offsets[desc.token_offsets.size() - 1] != desc.token_bytes.size() ||
      desc.token_offsets.size() - 1 > static_cast<size_t>(INT32_MAX)) {
    return EMBER_FAIL(ctx, bad, "tokenizer: token_offsets must have token_count + 1 entries from 0 to %zu",
                      desc.token_bytes.size());
  }
  Tokenizer t;
  t.token_bytes_ = desc.token_bytes.data();
  t.token_offsets_ = desc.token_offsets.data();
  t.token_count_ = desc.token_offsets.size() - 1;
  t.model_token_count_ = desc.model_token_count;
  t.added_ = desc.added_tokens.data();
  t.added_count_ = desc.added_tokens.size();
  t.pre_tokenizer_ = desc.pre_tokenizer;
  t.normalizer_ = desc.normalizer;
  t.ignore_merges_ = desc.ignore_merges;
  t.add_bos_ = desc.add_bos;
  t.bos_id_ = desc.bos_id;
  t.byte_level_ = byte_level;
  t.unk_id_ = desc.unk_id;
  t.fuse_unk_ = desc.fuse_unk;
  t.byte_fallback_ = desc.byte_fallback;
  t.metaspace_prepend_ = desc.metaspace_prepend;
  t.decoder_ = desc.decoder;
  t.decoder_strip_spaces_ = desc.decoder_strip_spaces;
  for (size_t id = 0; id < t.token_count_; ++id) {
    if (desc.token_offsets[id + 1] < desc.token_offsets[id]) {
      return EMBER_FAIL(ctx, bad, "tokenizer: token_offsets decrease at token %zu", id);
    }
    const size_t size = desc.token_offsets[id + 1] - desc.token_offsets[id];
    t.max_token_bytes_ = std::max(t.max_token_bytes_, size);
    // Token strings are text (HF's decoders only map them), so decode() stays well-formed.
    if (!byte_level && find_invalid_utf8(desc.token_bytes.data() + desc.token_offsets[id], size) != size) {
      return EMBER_FAIL(ctx, bad, "tokenizer: token %zu is not valid UTF-8 (a token string here)", id);
    }
  }
  if (t.model_token_count_ > t.token_count_) {
    return EMBER_FAIL(ctx, bad, "tokenizer: model_token_count %zu exceeds the %zu tokens", t.model_token_count_,
                      t.token_count_);
  }
  if (desc.add_bos && desc.bos_id >= t.token_count_) {
    return EMBER_FAIL(ctx, bad, "tokenizer: bos_id %u is not a token", desc.bos_id);
  }

  const size_t vocab_cap = table_capacity(t.model_token_count_);
  const size_t merge_cap = table_capacity(desc.merges.size());
  t.token_flags_ = allocator.allocate_array<uint8_t>(t.token_count_);
  t.vocab_slots_ = allocator.allocate_array<int32_t>(vocab_cap);
  t.merge_slots_ = allocator.allocate_array<MergeSlot>(merge_cap);
  t.merge_results_ = allocator.allocate_array<uint32_t>(desc.merges.size() + 1);
  t.added_order_ = allocator.allocate_array<uint32_t>(t.added_count_ + 1);
  if (!t.token_flags_ || !t.vocab_slots_ || !t.merge_slots_ || !t.merge_results_ || !t.added_order_) {
    return EMBER_FAIL(ctx, Error::OutOfMemory, "tokenizer: the allocator has less than the %zu bytes load needs",
                      memory_bytes(desc));
  }
  t.vocab_mask_ = vocab_cap - 1;
  t.merge_mask_ = merge_cap - 1;
  std::memset(t.token_flags_, 0, t.token_count_);

  // The BPE vocabulary: bytes -> id (HF BPE::vocab; strings there are unique, so bytes are too).
  for (size_t i = 0; i < vocab_cap; ++i) t.vocab_slots_[i] = -1;
  for (size_t id = 0; id < t.model_token_count_; ++id) {
    const Span<const uint8_t> bytes = t.token_bytes(static_cast<uint32_t>(id));
    if (bytes.empty()) continue;  // never produced by BPE
    if (t.find_model_token(bytes.data(), bytes.size()) >= 0) {
      return EMBER_FAIL(ctx, bad, "tokenizer: tokens %d and %zu have the same bytes",
                        t.find_model_token(bytes.data(), bytes.size()), id);
    }
    size_t slot = fnv1a(bytes.data(), bytes.size()) & t.vocab_mask_;
    while (t.vocab_slots_[slot] >= 0) slot = (slot + 1) & t.vocab_mask_;
    t.vocab_slots_[slot] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b) {
    const uint8_t byte = static_cast<uint8_t>(b);
    t.byte_tokens_[b] = t.find_model_token(&byte, 1);
    // HF BPE looks byte fallback tokens up as format!("<{b:#04X}>"): "<0x0A>", "<0xE4>".
    const char* hex = "0123456789ABCDEF";
    const uint8_t name[6] = {'<', '0', 'x', static_cast<uint8_t>(hex[b >> 4]), static_cast<uint8_t>(hex[b & 15]), '>'};
    t.fallback_tokens_[b] = byte_level ? -1 : t.find_model_token(name, sizeof(name));
  }

  // Merges: (left, right) -> rank, and rank -> result. HF collects them into a HashMap, so a pair
  // listed twice keeps its LAST rank.
  for (size_t i = 0; i < merge_cap; ++i) t.merge_slots_[i] = {0, 0, -1};
  for (size_t rank = 0; rank < desc.merges.size(); ++rank) {
    const MergeRule m = desc.merges[rank];
    if (m.left >= t.model_token_count_ || m.right >= t.model_token_count_) {
      return EMBER_FAIL(ctx, bad, "tokenizer: merge %zu joins %u and %u, not both BPE tokens", rank, m.left, m.right);
    }
    const Span<const uint8_t> l = t.token_bytes(m.left), r = t.token_bytes(m.right);
    const uint64_t h = fnv1a(r.data(), r.size(), fnv1a(l.data(), l.size()));
    int32_t result = -1;
    for (size_t slot = h & t.vocab_mask_; t.vocab_slots_[slot] >= 0; slot = (slot + 1) & t.vocab_mask_) {
      const Span<const uint8_t> c = t.token_bytes(static_cast<uint32_t>(t.vocab_slots_[slot]));
      if (c.size() == l.size() + r.size() && std::memcmp(c.data(), l.data(), l.size()) == 0 &&
          std::memcmp(c.data() + l.size(), r.data(), r.size()) == 0) {
        result = t.vocab_slots_[slot];
        break;
      }
    }
    if (result < 0) {
      return EMBER_FAIL(ctx, bad, "tokenizer: merge %zu (%u + %u): the joined bytes are not a BPE token", rank,
                        m.left, m.right);
    }
    t.merge_results_[rank] = static_cast<uint32_t>(result);
    size_t slot = mix_pair(m.left, m.right) & t.merge_mask_;
    while (t.merge_slots_[slot].rank >= 0 &&
           (t.merge_slots_[slot].left != m.left || t.merge_slots_[slot].right != m.right)) {
      slot = (slot + 1) & t.merge_mask_;
    }
    t.merge_slots_[slot] = {m.left, m.right, static_cast<int32_t>(rank)};
  }

  // Added tokens.
  for (size_t i = 0; i < t.added_count_; ++i) {
    const AddedTokenDesc& a = t.added_[i];
    if (a.id >= t.token_count_) return EMBER_FAIL(ctx, bad, "tokenizer: added token %zu has id %u, not a token", i, a.id);
    if (a.content_size == 0 || a.content == nullptr) return EMBER_FAIL(ctx, bad, "tokenizer: added token %u is empty", a.id);
    const uint8_t* content = reinterpret_cast<const uint8_t*>(a.content);
    if (find_invalid_utf8(content, a.content_size) != a.content_size) {
      return EMBER_FAIL(ctx, bad, "tokenizer: added token %u is not valid UTF-8", a.id);
    }
    if (t.token_flags_[a.id] & kAdded) return EMBER_FAIL(ctx, bad, "tokenizer: id %u is listed twice as an added token", a.id);
    t.token_flags_[a.id] = static_cast<uint8_t>(kAdded | (a.special ? kSpecial : 0));
    t.added_first_byte_[content[0]] = true;
    t.added_order_[i] = static_cast<uint32_t>(i);
  }
  for (size_t id = t.model_token_count_; id < t.token_count_; ++id) {
    if (!(t.token_flags_[id] & kAdded)) {
      return EMBER_FAIL(ctx, bad, "tokenizer: id %zu is neither a BPE token nor an added token", id);
    }
  }
  // HF's ByteFallback decoder takes any token string that looks like a byte, added tokens too.
  if (t.decoder_ == DecoderKind::ReplaceByteFallback) {
    for (size_t id = 0; id < t.token_count_; ++id) {
      if (byte_token_value(t.token_bytes(static_cast<uint32_t>(id))) >= 0) t.token_flags_[id] |= kByte;
    }
  }
  const AddedTokenDesc* added = t.added_;
  auto content_less = [added](uint32_t a, uint32_t b) {
    const std::string_view x(added[a].content, added[a].content_size), y(added[b].content, added[b].content_size);
    return x < y;  // bytewise (char_traits<char>::compare is memcmp): a prefix sorts first
  };
  std::sort(t.added_order_, t.added_order_ + t.added_count_, content_less);
  for (size_t i = 1; i < t.added_count_; ++i) {
    if (!content_less(t.added_order_[i - 1], t.added_order_[i])) {
      return EMBER_FAIL(ctx, bad, "tokenizer: added tokens %u and %u have the same content",
                        added[t.added_order_[i - 1]].id, added[t.added_order_[i]].id);
    }
  }
  return t;
}

int32_t Tokenizer::find_model_token(const uint8_t* bytes, size_t size) const {
  for (size_t slot = fnv1a(bytes, size) & vocab_mask_; vocab_slots_[slot] >= 0; slot = (slot + 1) & vocab_mask_) {
    const int32_t id = vocab_slots_[slot];
    const uint32_t begin = token_offsets_[id], end = token_offsets_[id + 1];
    if (end - begin == size && std::memcmp(token_bytes_ + begin, bytes, size) == 0) return id;
  }
  return -1;
}

int32_t Tokenizer::find_merge(uint32_t left, uint32_t right) const {
  for (size_t slot = mix_pair(left, right) & merge_mask_; merge_slots_[slot].rank >= 0; slot = (slot + 1) & merge_mask_) {
    if (merge_slots_[slot].left == left && merge_slots_[slot].right == right) return merge_slots_[slot].rank;
  }
  return -1;
}

int32_t Tokenizer::find_token(std::string_view content) const {
  for (size_t i = 0; i < added_count_; ++i) {
    if (std::string_view(added_[i].content, added_[i].content_size) == content) return static_cast<int32_t>(added_[i].id);
  }
  return content.empty() ? -1 : find_model_token(reinterpret_cast<const uint8_t*>(content.data()), content.size());
}

// The longest added token that starts at text[pos] (HF matches added tokens with an Aho-Corasick
// automaton in LeftmostLongest mode); returns its length, 0 if none. The tokens sorted by content
// form an implicit trie: after d matched bytes, the candidates are a contiguous range, and a token
// of exactly d bytes is the first of it.
size_t Tokenizer::match_added(const uint8_t* text, size_t size, size_t pos, uint32_t* id) const {
  size_t lo = 0, hi = added_count_, best = 0;
  for (size_t d = 0;; ++d) {
    if (lo < hi && added_[added_order_[lo]].content_size == d) {
      best = d;
      *id = added_[added_order_[lo]].id;
      ++lo;
    }
    if (lo >= hi || pos + d >= size) break;
    const uint8_t c = text[pos + d];
    auto byte_at = [&](size_t k) { return static_cast<uint8_t>(added_[added_order_[k]].content[d]); };
    size_t a = lo, b = hi;  // first k with byte_at(k) >= c
    while (a < b) {
      const size_t mid = (a + b) / 2;
      if (byte_at(mid) < c) a = mid + 1; else b = mid;
    }
    size_t e = a, f = hi;  // first k with byte_at(k) > c
    while (e < f) {
      const size_t mid = (e + f) / 2;
      if (byte_at(mid) <= c) e = mid + 1; else f = mid;
    }
    lo = a;
    hi = e;
  }
  return best;
}

Result<size_t> Tokenizer::encode(std::string_view text, Span<int32_t> out_ids, Span<uint8_t> scratch,
                                 bool add_special_tokens, ErrorContext* ctx) const {
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const size_t size = text.size();
  const size_t invalid = find_invalid_utf8(bytes, size);
  if (invalid != size) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "tokenizer: encode: ill-formed UTF-8 at byte %zu of %zu", invalid,
                      size);
  }
  // The scratch holds uint32_t and structs: start it 16-aligned (encode_scratch_bytes counts the slack).
  const size_t skip = (kAlign - reinterpret_cast<uintptr_t>(scratch.data()) % kAlign) % kAlign;
  Segment out{out_ids.data(), out_ids.size(), 0, scratch.data() + std::min(skip, scratch.size()),
              scratch.size() - std::min(skip, scratch.size()), size};
  auto push = [&](uint32_t id) -> Status {
    if (out.count == out.capacity) {
      return EMBER_FAIL(ctx, Error::OutOfMemory, "tokenizer: encode: out_ids holds %zu ids (max_token_count = %zu)",
                        out.capacity, max_token_count(size));
    }
    out.ids[out.count++] = static_cast<int32_t>(id);
    return Status::ok();
  };
  // The post-processor's "<bos> $A" template.
  if (add_special_tokens && add_bos_) EMBER_RETURN_IF_ERROR(push(bos_id_));
  size_t pos = 0;
  while (pos < size) {
    size_t match = size, match_size = 0;
    uint32_t id = 0;
    if (added_count_ != 0) {
      for (size_t i = pos; i < size; ++i) {
        if (added_first_byte_[bytes[i]] && (match_size = match_added(bytes, size, i, &id)) != 0) {
          match = i;
          break;
        }
      }
    }
    if (match > pos) EMBER_RETURN_IF_ERROR(encode_segment(bytes + pos, match - pos, pos == 0, out, ctx));
    if (match_size == 0) break;
    EMBER_RETURN_IF_ERROR(push(id));
    pos = match + match_size;
  }
  return out.count;
}

Status Tokenizer::encode_segment(const uint8_t* text, size_t size, bool at_text_start, Segment& out,
                                 ErrorContext* ctx) const {
  uint8_t* work = out.scratch;
  size_t work_size = out.scratch_size;
  const bool metaspace =
      pre_tokenizer_ == PreTokenizerKind::Metaspace || pre_tokenizer_ == PreTokenizerKind::MetaspaceSplit;
  if (normalizer_ == NormalizerKind::Nfc && !is_nfc_quick(text, size)) {
    // NFC of the segment into the front of the scratch; its work area is reused by the BPE.
    const size_t text_bytes = align_up(kNfcMaxExpansion * size);
    const size_t need = text_bytes + nfc_work_count(size) * sizeof(uint32_t);
    if (out.scratch_size < need) return too_small(ctx, "encode scratch (bytes)", out.scratch_size, need);
    const size_t normalized = normalize_nfc(text, size, out.scratch, reinterpret_cast<uint32_t*>(out.scratch + text_bytes));
    text = out.scratch;
    size = normalized;
    work = out.scratch + text_bytes;
    work_size = out.scratch_size - text_bytes;
  } else if (metaspace || normalizer_ == NormalizerKind::Replace || normalizer_ == NormalizerKind::PrependReplace) {
    // Every space becomes "▁", into the front of the scratch. HF's Prepend normalizer puts a "▁"
    // before every (non-empty) segment; the Metaspace pre-tokenizer only before one that does not
    // start with "▁" after the replacement, and with prepend_scheme "first" only at the start of
    // the text (PrependScheme::First checks the segment's original offset).
    bool prepend = normalizer_ == NormalizerKind::PrependReplace;
    if (metaspace && (metaspace_prepend_ == MetaspacePrepend::Always ||
                      (metaspace_prepend_ == MetaspacePrepend::First && at_text_start))) {
      prepend = !(text[0] == ' ' || (size >= 3 && text[0] == 0xE2 && text[1] == 0x96 && text[2] == 0x81));
    }
    const size_t text_bytes = align_up(3 * size + 3);
    if (out.scratch_size < text_bytes) return too_small(ctx, "encode scratch (bytes)", out.scratch_size, text_bytes);
    uint8_t* dst = out.scratch;
    size_t n = 0;
    auto put_metaspace = [&] {
      dst[n++] = 0xE2;
      dst[n++] = 0x96;
      dst[n++] = 0x81;
    };
    if (prepend) put_metaspace();
    for (size_t i = 0; i < size; ++i) {
      if (text[i] == ' ') {
        put_metaspace();
      } else {
        dst[n++] = text[i];
      }
    }
    text = dst;
    size = n;
    work = out.scratch + text_bytes;
    work_size = out.scratch_size - text_bytes;
  }
  PreTokenCursor pieces(pre_tokenizer_, text, size);
  for (size_t begin = 0, end = 0; pieces.next(&begin, &end);) {
    EMBER_RETURN_IF_ERROR(encode_piece(text + begin, end - begin, work, work_size, out, ctx));
  }
  return Status::ok();
}

// HF BPE::tokenize on one pre-token (src/models/bpe/model.rs, word.rs).
Status Tokenizer::encode_piece(const uint8_t* piece, size_t size, uint8_t* work, size_t work_size, Segment& out,
                               ErrorContext* ctx) const {
  auto push = [&](int32_t id) -> Status {
    if (out.count == out.capacity) {
      return EMBER_FAIL(ctx, Error::OutOfMemory, "tokenizer: encode: out_ids holds %zu ids (max_token_count = %zu)",
                        out.capacity, max_token_count(out.text_bytes));
    }
    out.ids[out.count++] = id;
    return Status::ok();
  };
  // ignore_merges: a piece that is a vocabulary token is that token, merges or not.
  if (ignore_merges_) {
    const int32_t id = find_model_token(piece, size);
    if (id >= 0) return push(id);
  }
  if (size == 1 && byte_tokens_[piece[0]] >= 0) return push(byte_tokens_[piece[0]]);
  const size_t need = piece_work_bytes(size);
  if (work_size < need) return too_small(ctx, "encode scratch (bytes)", out.scratch_size, static_cast<size_t>(work - out.scratch) + need);
  Symbol* symbols = reinterpret_cast<Symbol*>(work);
  HeapEntry* heap = reinterpret_cast<HeapEntry*>(work + align_up(size * sizeof(Symbol)));
  // BPE::merge_word: one symbol per character (per byte in byte-level layouts, where every byte is
  // a character of the ByteLevel alphabet), so never more symbols than bytes. A character that is
  // no token becomes its "<0xNN>" byte tokens (byte_fallback, when all of them exist), else unk
  // (fuse_unk: one for a run), else nothing. An unk waits until the next character that IS a token
  // (or the end): byte fallback tokens go in before it, as HF's merge_word does.
  int32_t count = 0;
  bool unk_pending = false;
  auto add = [&](int32_t id) {
    symbols[count] = {id, count - 1, count + 1};
    ++count;
  };
  for (size_t i = 0; i < size;) {
    const uint8_t lead = piece[i];
    const size_t length = byte_level_ || lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const int32_t id = length == 1 ? byte_tokens_[lead] : find_model_token(piece + i, length);
    if (id >= 0) {
      if (unk_pending) add(unk_id_);
      unk_pending = false;
      add(id);
    } else {
      bool fallback = byte_fallback_;
      for (size_t k = 0; fallback && k < length; ++k) fallback = fallback_tokens_[piece[i + k]] >= 0;
      if (fallback) {
        for (size_t k = 0; k < length; ++k) add(fallback_tokens_[piece[i + k]]);
      } else if (unk_id_ >= 0) {
        if (unk_pending && !fuse_unk_) add(unk_id_);
        unk_pending = true;
      }
    }
    i += length;
  }
  if (unk_pending) add(unk_id_);
  if (count == 0) return Status::ok();
  symbols[count - 1].next = -1;
  size_t heap_size = 0;
  for (int32_t i = 0; i + 1 < count; ++i) {
    const int32_t rank = find_merge(static_cast<uint32_t>(symbols[i].id), static_cast<uint32_t>(symbols[i + 1].id));
    if (rank >= 0) heap_push(heap, &heap_size, {static_cast<uint32_t>(rank), static_cast<uint32_t>(i)});
  }
  // Word::merge_all: pop the best candidate; skip it if its symbol is gone, has no right neighbour
  // any more, or the current pair there no longer merges into the same token (a stale entry);
  // otherwise merge and queue the new pairs with the left and right neighbours.
  while (heap_size > 0) {
    const HeapEntry top = heap_pop(heap, &heap_size);
    Symbol& s = symbols[top.pos];
    if (s.id < 0 || s.next < 0) continue;
    const Symbol right = symbols[s.next];
    const int32_t current = find_merge(static_cast<uint32_t>(s.id), static_cast<uint32_t>(right.id));
    const uint32_t new_id = merge_results_[top.rank];
    if (current < 0 || merge_results_[current] != new_id) continue;
    symbols[s.next].id = -1;
    s.id = static_cast<int32_t>(new_id);
    s.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(top.pos);
    if (s.prev >= 0) {
      const int32_t rank = find_merge(static_cast<uint32_t>(symbols[s.prev].id), new_id);
      if (rank >= 0) heap_push(heap, &heap_size, {static_cast<uint32_t>(rank), static_cast<uint32_t>(s.prev)});
    }
    if (s.next >= 0) {
      const int32_t rank = find_merge(new_id, static_cast<uint32_t>(symbols[s.next].id));
      if (rank >= 0) heap_push(heap, &heap_size, {static_cast<uint32_t>(rank), top.pos});
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) EMBER_RETURN_IF_ERROR(push(symbols[i].id));
  return Status::ok();
}

// The space rewrite of the SentencePiece layouts: none, spaces only (a segment grows at most 3x),
// or spaces and a "▁" in front (at most 3x + 3 bytes, so 6x for a segment of at least one byte).
int Tokenizer::rewrite_kind() const {
  const bool metaspace =
      pre_tokenizer_ == PreTokenizerKind::Metaspace || pre_tokenizer_ == PreTokenizerKind::MetaspaceSplit;
  if (normalizer_ == NormalizerKind::PrependReplace || (metaspace && metaspace_prepend_ != MetaspacePrepend::Never)) {
    return 2;
  }
  return metaspace || normalizer_ == NormalizerKind::Replace ? 1 : 0;
}

size_t Tokenizer::max_token_count(size_t text_bytes) const {
  size_t normalized = text_bytes;
  if (normalizer_ == NormalizerKind::Nfc) normalized = kNfcMaxExpansion * text_bytes;
  if (rewrite_kind() != 0) normalized = (rewrite_kind() == 2 ? 6 : 3) * text_bytes;
  return normalized + (add_bos_ ? 1 : 0);
}

size_t Tokenizer::encode_scratch_bytes(size_t text_bytes) const {
  if (rewrite_kind() != 0) {
    const size_t segment = 3 * text_bytes + 3;
    return align_up(segment) + piece_work_bytes(segment) + kAlign;
  }
  if (normalizer_ != NormalizerKind::Nfc) return piece_work_bytes(text_bytes) + kAlign;
  const size_t normalized = kNfcMaxExpansion * text_bytes;
  return align_up(normalized) +
         std::max(nfc_work_count(text_bytes) * sizeof(uint32_t), piece_work_bytes(normalized)) + kAlign;
}

Result<size_t> Tokenizer::decode(Span<const int32_t> ids, Span<char> out, bool skip_special_tokens,
                                 ErrorContext* ctx) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= token_count_) {
      return EMBER_FAIL(ctx, Error::InvalidArgument, "tokenizer: decode: ids[%zu] = %d is not a token (%zu tokens)",
                        i, ids[i], token_count_);
    }
  }
  uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
  auto skipped = [&](size_t i) { return skip_special_tokens && is_special(static_cast<uint32_t>(ids[i])); };
  if (decoder_ == DecoderKind::ByteLevel) {
    Utf8Tail tail;
    size_t written = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (skipped(i)) continue;
      const Span<const uint8_t> bytes = token_bytes(static_cast<uint32_t>(ids[i]));
      if (!append_lossy_utf8(tail, bytes.data(), bytes.size(), dst, out.size(), &written)) {
        return too_small(ctx, "decode output (bytes)", out.size(), 3 * max_token_bytes_ * ids.size());
      }
    }
    if (!flush_lossy_utf8(tail, dst, out.size(), &written)) {
      return too_small(ctx, "decode output (bytes)", out.size(), written + 3);
    }
    return written;
  }
  // HF: the special tokens are dropped first, then the decoders run on the token strings.
  TextSink sink{dst, out.size(), 0, decoder_strip_spaces_};
  bool first = true;
  for (size_t i = 0; i < ids.size();) {
    if (skipped(i)) {
      ++i;
      continue;
    }
    const uint32_t id = static_cast<uint32_t>(ids[i]);
    bool ok = true;
    if (token_flags_[id] & kByte) {
      // ByteFallback: the run of byte tokens from here (a dropped special token does not end it)
      // is its bytes if they are well-formed UTF-8, else one U+FFFD per token.
      Utf8Validator check;
      size_t end = i;
      for (; end < ids.size(); ++end) {
        if (skipped(end)) continue;
        if (!(token_flags_[ids[end]] & kByte)) break;
        check.push(static_cast<uint8_t>(byte_token_value(token_bytes(static_cast<uint32_t>(ids[end])))));
      }
      for (; ok && i < end; ++i) {
        if (skipped(i)) continue;
        ok = check.is_complete()
                 ? sink.put(static_cast<uint8_t>(byte_token_value(token_bytes(static_cast<uint32_t>(ids[i])))))
                 : sink.put_replacement();
      }
    } else {
      ok = sink.put_text(token_bytes(id), decoder_ == DecoderKind::Metaspace && first);
      ++i;
    }
    if (!ok) return too_small(ctx, "decode output (bytes)", out.size(), 3 * max_token_bytes_ * ids.size());
    first = false;
  }
  return sink.written;
}

void StreamDecoder::reset() {
  tail_ = Utf8Tail();
  first_token_ = true;
  strip_left_ = tokenizer_->decoder_strip_spaces_;
  run_ill_formed_ = false;
  run_check_ = Utf8Validator();
  held_size_ = 0;
}

size_t StreamDecoder::max_push_bytes() const {
  if (tokenizer_->decoder_ == DecoderKind::ByteLevel) return 3 * (tokenizer_->max_token_bytes() + 3);
  // The held run as U+FFFDs (or the byte that overflows it with them), plus a token's text.
  return 3 * (kMaxHeldBytes + 1) + tokenizer_->max_token_bytes();
}

bool StreamDecoder::flush_run(Tokenizer::TextSink& sink) {
  const bool text = run_check_.is_complete();
  for (size_t i = 0; i < held_size_; ++i) {
    if (!(text ? sink.put(held_[i]) : sink.put_replacement())) return false;
  }
  held_size_ = 0;
  run_ill_formed_ = false;
  run_check_ = Utf8Validator();
  return true;
}

bool StreamDecoder::push_byte(uint8_t b, Tokenizer::TextSink& sink) {
  if (run_ill_formed_) return sink.put_replacement();  // the run is U+FFFDs whatever follows
  size_t start = 0;
  if (held_size_ == kMaxHeldBytes) {
    // Well-formed so far and full: give out its complete characters (class comment).
    start = find_invalid_utf8(held_, held_size_);
    for (size_t i = 0; i < start; ++i) {
      if (!sink.put(held_[i])) return false;
    }
  }
  held_[held_size_] = b;  // held_ has a spare byte for this
  run_check_.push(b);
  const size_t size = held_size_ + 1u - start;
  if (!run_check_.is_prefix()) {
    for (size_t i = 0; i < size; ++i) {
      if (!sink.put_replacement()) return false;
    }
    run_ill_formed_ = true;
    held_size_ = 0;
    return true;
  }
  if (start != 0) std::memmove(held_, held_ + start, size);
  held_size_ = static_cast<uint16_t>(size);
  return true;
}

Result<size_t> StreamDecoder::push(int32_t id, Span<char> out, ErrorContext* ctx) {
  const Tokenizer& tok = *tokenizer_;
  if (id < 0 || static_cast<size_t>(id) >= tok.token_count()) {
    return EMBER_FAIL(ctx, Error::InvalidArgument, "tokenizer: stream decode: id %d is not a token (%zu tokens)", id,
                      tok.token_count());
  }
  if (skip_special_tokens_ && tok.is_special(static_cast<uint32_t>(id))) return size_t{0};
  const Span<const uint8_t> bytes = tok.token_bytes(static_cast<uint32_t>(id));
  uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
  if (tok.decoder_ == DecoderKind::ByteLevel) {
    Utf8Tail tail = tail_;  // committed only on success
    size_t written = 0;
    if (!append_lossy_utf8(tail, bytes.data(), bytes.size(), dst, out.size(), &written)) {
      return too_small(ctx, "stream decode output (bytes)", out.size(), 3 * (tail_.size + bytes.size()));
    }
    tail_ = tail;
    return written;
  }
  // The state is restored on failure (only held_[held_size_], past the held bytes, may change).
  const bool first_token = first_token_, run_ill_formed = run_ill_formed_;
  const Utf8Validator run_check = run_check_;
  const uint16_t held_size = held_size_;
  Tokenizer::TextSink sink{dst, out.size(), 0, strip_left_};
  bool ok;
  if (tok.token_flags_[id] & Tokenizer::kByte) {
    ok = push_byte(static_cast<uint8_t>(byte_token_value(bytes)), sink);
  } else {
    ok = flush_run(sink) && sink.put_text(bytes, tok.decoder_ == DecoderKind::Metaspace && first_token_);
  }
  first_token_ = false;
  if (!ok) {
    first_token_ = first_token;
    run_ill_formed_ = run_ill_formed;
    run_check_ = run_check;
    held_size_ = held_size;
    return too_small(ctx, "stream decode output (bytes)", out.size(), max_push_bytes());
  }
  strip_left_ = sink.strip_left;
  return sink.written;
}

Result<size_t> StreamDecoder::flush(Span<char> out, ErrorContext* ctx) {
  uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
  size_t written = 0;
  if (tokenizer_->decoder_ == DecoderKind::ByteLevel) {
    Utf8Tail tail = tail_;
    if (!flush_lossy_utf8(tail, dst, out.size(), &written)) {
      return too_small(ctx, "stream decode output (bytes)", out.size(), 3);
    }
  } else {
    Tokenizer::TextSink sink{dst, out.size(), 0, strip_left_};
    const bool run_ill_formed = run_ill_formed_;
    const Utf8Validator run_check = run_check_;
    const uint16_t held_size = held_size_;
    if (!flush_run(sink)) {
      run_ill_formed_ = run_ill_formed;
      run_check_ = run_check;
      held_size_ = held_size;
      return too_small(ctx, "stream decode output (bytes)", out.size(), 3 * static_cast<size_t>(held_size_));
    }
    written = sink.written;
  }
  reset();
  return written;
}

}  // namespace ember::llm
