#include "runtime/llm/block_allocator.h"

#include <cstring>

#include "runtime/core/error.h"

namespace ember::llm {
namespace {

constexpr int32_t kMaxBlocks = int32_t(1) << 30;

// Slots: a power of two at least twice the block count, so live entries fill at most half of them;
// publish() rebuilds the table when live entries and tombstones fill three quarters.
int32_t slot_count(int32_t blocks) {
  int32_t s = 2;
  while (s < 2 * blocks) s *= 2;
  return s;
}

size_t align8(size_t n) { return (n + 7) / 8 * 8; }

// SplitMix64's finalizer: a well-mixed 64-bit permutation.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

size_t BlockAllocator::memory_bytes(int32_t num_blocks) {
  if (num_blocks < 1 || num_blocks >= kMaxBlocks) return 0;
  const size_t n = size_t(num_blocks);
  return 8 + align8(n * 8) + 3 * align8(n * 4) + align8(n) + align8(size_t(slot_count(num_blocks)) * 4);
}

uint64_t BlockAllocator::chain_hash(uint64_t parent, Span<const int32_t> tokens) {
  uint64_t h = mix(parent ^ 0x6A09E667F3BCC909ull);
  for (size_t i = 0; i < tokens.size(); ++i) h = mix(h ^ uint64_t(uint32_t(tokens[i])));
  return mix(h ^ uint64_t(tokens.size()));
}

Status BlockAllocator::init(int32_t num_blocks, Span<uint8_t> memory, ErrorContext* error) {
  const size_t need = memory_bytes(num_blocks);
  if (need == 0) {
    return EMBER_FAIL(error, Error::InvalidArgument, "block pool of %d blocks: needs 1 to 2^30 - 1", num_blocks);
  }
  if (memory.size() < need) {
    return EMBER_FAIL(error, Error::OutOfMemory, "block pool of %d blocks needs %zu bytes of bookkeeping, got %zu",
                      num_blocks, need, memory.size());
  }
  uint8_t* p = memory.data();
  p += (8 - reinterpret_cast<uintptr_t>(p) % 8) % 8;  // memory_bytes reserves these 8
  const size_t n = size_t(num_blocks);
  hash_ = reinterpret_cast<uint64_t*>(p);
  p += align8(n * 8);
  ref_ = reinterpret_cast<int32_t*>(p);
  p += align8(n * 4);
  prev_ = reinterpret_cast<int32_t*>(p);
  p += align8(n * 4);
  next_ = reinterpret_cast<int32_t*>(p);
  p += align8(n * 4);
  published_ = p;
  p += align8(n);
  table_ = reinterpret_cast<int32_t*>(p);
  count_ = num_blocks;
  slots_ = slot_count(num_blocks);
  for (int32_t b = 0; b < count_; ++b) {
    ref_[b] = 0;
    published_[b] = 0;
    hash_[b] = 0;
    prev_[b] = b - 1;
    next_[b] = b + 1 < count_ ? b + 1 : -1;
  }
  for (int32_t s = 0; s < slots_; ++s) table_[s] = kEmpty;
  used_slots_ = 0;
  head_ = 0;
  tail_ = count_ - 1;
  free_count_ = count_;
  return Status::ok();
}

void BlockAllocator::unlink(int32_t b) {
  if (prev_[b] >= 0) next_[prev_[b]] = next_[b]; else head_ = next_[b];
  if (next_[b] >= 0) prev_[next_[b]] = prev_[b]; else tail_ = prev_[b];
  prev_[b] = next_[b] = -1;
  --free_count_;
}

int32_t BlockAllocator::slot_of(uint64_t hash) const {
  const uint32_t mask = uint32_t(slots_ - 1);
  for (uint32_t i = uint32_t(mix(hash)) & mask, probes = 0; probes < uint32_t(slots_); i = (i + 1) & mask, ++probes) {
    const int32_t b = table_[i];
    if (b == kEmpty) return -1;
    if (b >= 0 && hash_[b] == hash) return int32_t(i);
  }
  return -1;
}

void BlockAllocator::forget(int32_t b) {
  if (published_[b] == 0) return;
  const int32_t s = slot_of(hash_[b]);
  EMBER_DCHECK(s >= 0 && table_[s] == b);
  table_[s] = kTombstone;
  published_[b] = 0;
}

int32_t BlockAllocator::allocate() {
  if (head_ < 0) return -1;
  const int32_t b = head_;
  unlink(b);
  forget(b);
  ref_[b] = 1;
  return b;
}

void BlockAllocator::retain(int32_t b) {
  EMBER_DCHECK(b >= 0 && b < count_ && ref_[b] > 0);
  ++ref_[b];
}

void BlockAllocator::release(int32_t b) {
  EMBER_DCHECK(b >= 0 && b < count_ && ref_[b] > 0);
  if (--ref_[b] > 0) return;
  prev_[b] = tail_;
  next_[b] = -1;
  if (tail_ >= 0) next_[tail_] = b; else head_ = b;
  tail_ = b;
  ++free_count_;
}

bool BlockAllocator::publish(int32_t b, uint64_t hash) {
  EMBER_DCHECK(b >= 0 && b < count_ && ref_[b] > 0);
  if (published_[b] != 0) return hash_[b] == hash;
  if (slot_of(hash) >= 0) return false;
  const uint32_t mask = uint32_t(slots_ - 1);
  uint32_t i = uint32_t(mix(hash)) & mask;
  while (table_[i] >= 0) i = (i + 1) & mask;  // an empty slot or a tombstone; one exists (see below)
  if (table_[i] == kEmpty) ++used_slots_;
  table_[i] = b;
  hash_[b] = hash;
  published_[b] = 1;
  if (used_slots_ * 4 > slots_ * 3) {  // too few empty slots left: drop the tombstones
    used_slots_ = 0;
    for (int32_t s = 0; s < slots_; ++s) table_[s] = kEmpty;
    for (int32_t blk = 0; blk < count_; ++blk) {
      if (published_[blk] == 0) continue;
      uint32_t j = uint32_t(mix(hash_[blk])) & mask;
      while (table_[j] != kEmpty) j = (j + 1) & mask;
      table_[j] = blk;
      ++used_slots_;
    }
  }
  return true;
}

int32_t BlockAllocator::lookup(uint64_t hash) {
  const int32_t s = slot_of(hash);
  if (s < 0) return -1;
  const int32_t b = table_[s];
  if (ref_[b] == 0) unlink(b);
  ++ref_[b];
  return b;
}

}  // namespace ember::llm
