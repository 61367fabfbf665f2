// The KV cache's block pool bookkeeping (docs/DESIGN.md §6): a fixed number of blocks, each holding
// block_size tokens' K and V in every layer. Blocks are reference-counted (a prefix shared by several
// sequences is stored once) and full blocks can be published under a hash of their tokens and of
// everything before them, so a later request with the same prefix reuses them (prefix caching).
//
//   BlockAllocator blocks;
//   EMBER_RETURN_IF_ERROR(blocks.init(num_blocks, memory, &ctx));   // memory_bytes(num_blocks) bytes
//   int32_t b = blocks.allocate();                                  // -1: none free
//   uint64_t h = BlockAllocator::chain_hash(parent, tokens);        // a full block's identity
//   blocks.publish(b, h);                                           // reusable by a later prefix
//   int32_t hit = blocks.lookup(h);                                 // retained on a hit, else -1
//   blocks.release(b);
//
// Free blocks sit in one list in the order they were freed; allocate() takes the least recently
// freed one, and a published block that is free stays findable by lookup() until allocate() reuses
// it (so a finished request's prefix survives as long as the pool has room). Everything is O(1)
// except the hash table probe (open addressing, at most twice as many slots as blocks). No heap:
// the arrays live in the caller's memory. Not thread-safe (the scheduler owns it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/span.h"
#include "runtime/core/status.h"

namespace ember::llm {

class BlockAllocator {
 public:
  // Bytes init() needs for num_blocks blocks (0 when num_blocks is out of range).
  static size_t memory_bytes(int32_t num_blocks);
  // The identity of a full block: a 64-bit hash of the parent block's hash (0 for the first block)
  // and the block's token ids.
  static uint64_t chain_hash(uint64_t parent, Span<const int32_t> tokens);

  // num_blocks in [1, 2^30); `memory` at least memory_bytes(num_blocks) bytes, any alignment, owned
  // by the caller for the allocator's lifetime. Every block starts free and unpublished.
  Status init(int32_t num_blocks, Span<uint8_t> memory, ErrorContext* error = nullptr);

  int32_t block_count() const { return count_; }
  int32_t free_count() const { return free_count_; }
  int32_t ref_count(int32_t block) const { return ref_[block]; }
  bool is_published(int32_t block) const { return published_[block] != 0; }

  // A free block with refcount 1, unpublished (a published free block is forgotten first); -1 when
  // every block is in use.
  int32_t allocate();
  // refcount + 1 (the block must be in use).
  void retain(int32_t block);
  // refcount - 1; at 0 the block becomes free (still findable by lookup if published).
  void release(int32_t block);
  // Makes an in-use block findable under `hash`. A hash already published by another block keeps
  // that block (the caller keeps its own, unpublished); returns whether this block was published.
  bool publish(int32_t block, uint64_t hash);
  // The block published under `hash`, retained (taken off the free list if it was free); -1 if none.
  int32_t lookup(uint64_t hash);

 private:
  static constexpr int32_t kEmpty = -1, kTombstone = -2;
  int32_t slot_of(uint64_t hash) const;  // the slot holding hash, or -1
  void unlink(int32_t block);            // off the free list
  void forget(int32_t block);            // unpublish

  int32_t count_ = 0, free_count_ = 0, slots_ = 0;
  int32_t used_slots_ = 0;          // table slots holding a block or a tombstone
  int32_t head_ = -1, tail_ = -1;   // free list, least recently freed first
  int32_t* ref_ = nullptr;
  int32_t* prev_ = nullptr;
  int32_t* next_ = nullptr;
  uint8_t* published_ = nullptr;
  uint64_t* hash_ = nullptr;        // per block, when published
  int32_t* table_ = nullptr;        // slots_ entries: block id, kEmpty or kTombstone
};

}  // namespace ember::llm
