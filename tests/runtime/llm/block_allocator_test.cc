// runtime/llm/block_allocator: refcounts, LRU reuse of free blocks, prefix publishing and lookup,
// errors, and a randomized run against a straightforward model (std::map / std::deque).
#include "runtime/llm/block_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <vector>

namespace ember::llm {
namespace {

struct Pool {
  std::vector<uint8_t> memory;
  BlockAllocator blocks;
  explicit Pool(int32_t n) : memory(BlockAllocator::memory_bytes(n) + 3) {
    // An odd offset: init aligns for itself.
    EXPECT_TRUE(blocks.init(n, Span<uint8_t>(memory.data() + 3, memory.size() - 3)).is_ok());
  }
};

TEST(BlockAllocatorTest, AllocatesEveryBlockOnceThenReusesTheLeastRecentlyFreed) {
  Pool p(4);
  BlockAllocator& b = p.blocks;
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(b.allocate());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(b.allocate(), -1);
  EXPECT_EQ(b.free_count(), 0);
  b.release(2);
  b.release(0);
  EXPECT_EQ(b.free_count(), 2);
  EXPECT_EQ(b.allocate(), 2);  // freed first
  EXPECT_EQ(b.allocate(), 0);
  b.retain(1);
  EXPECT_EQ(b.ref_count(1), 2);
  b.release(1);
  EXPECT_EQ(b.free_count(), 0);
  b.release(1);
  EXPECT_EQ(b.free_count(), 1);
  EXPECT_EQ(b.ref_count(1), 0);
}

TEST(BlockAllocatorTest, PublishedBlocksAreFoundUntilReused) {
  Pool p(3);
  BlockAllocator& b = p.blocks;
  const int32_t tokens[] = {5, 6, 7, 8};
  const uint64_t h0 = BlockAllocator::chain_hash(0, Span<const int32_t>(tokens, 2));
  const uint64_t h1 = BlockAllocator::chain_hash(h0, Span<const int32_t>(tokens + 2, 2));
  EXPECT_NE(h0, h1);
  EXPECT_EQ(h0, BlockAllocator::chain_hash(0, Span<const int32_t>(tokens, 2)));
  EXPECT_NE(h0, BlockAllocator::chain_hash(1, Span<const int32_t>(tokens, 2)));
  EXPECT_NE(h0, BlockAllocator::chain_hash(0, Span<const int32_t>(tokens, 3)));
  const int32_t a = b.allocate(), c = b.allocate();
  EXPECT_TRUE(b.publish(a, h0));
  EXPECT_TRUE(b.publish(c, h1));
  EXPECT_TRUE(b.publish(a, h0));   // again, same hash: still published
  EXPECT_FALSE(b.publish(a, h1));  // a block keeps its first hash
  const int32_t d = b.allocate();
  EXPECT_FALSE(b.publish(d, h0));  // taken by a
  EXPECT_FALSE(b.is_published(d));
  // A hit retains; a free published block leaves the free list.
  EXPECT_EQ(b.lookup(h0), a);
  EXPECT_EQ(b.ref_count(a), 2);
  b.release(a);
  b.release(a);
  b.release(c);
  EXPECT_EQ(b.free_count(), 2);
  EXPECT_EQ(b.lookup(h0), a);
  EXPECT_EQ(b.free_count(), 1);
  EXPECT_EQ(b.ref_count(a), 1);
  // allocate() reuses c (the only free block) and forgets its hash.
  EXPECT_EQ(b.allocate(), c);
  EXPECT_FALSE(b.is_published(c));
  EXPECT_EQ(b.lookup(h1), -1);
  EXPECT_EQ(b.lookup(12345), -1);
}

TEST(BlockAllocatorTest, RefusesBadSizes) {
  BlockAllocator b;
  std::vector<uint8_t> memory(BlockAllocator::memory_bytes(8));
  ErrorContext error;
  EXPECT_EQ(BlockAllocator::memory_bytes(0), 0u);
  EXPECT_EQ(BlockAllocator::memory_bytes(int32_t(1) << 30), 0u);
  EXPECT_EQ(b.init(0, Span<uint8_t>(memory.data(), memory.size()), &error).code(), Error::InvalidArgument);
  EXPECT_TRUE(error.has_error());
  error.clear();
  EXPECT_EQ(b.init(8, Span<uint8_t>(memory.data(), memory.size() - 1), &error).code(), Error::OutOfMemory);
  EXPECT_TRUE(error.has_error());
}

// Random allocate / retain / release / publish / lookup on a 16-block pool against a model, with
// enough publishing churn to rebuild the hash table many times.
TEST(BlockAllocatorTest, MatchesAModelUnderRandomOperations) {
  constexpr int32_t kBlocks = 16;
  Pool p(kBlocks);
  BlockAllocator& b = p.blocks;
  std::map<int32_t, int32_t> refs;          // in-use block -> refcount
  std::deque<int32_t> free_list;            // least recently freed first
  std::map<uint64_t, int32_t> published;    // hash -> block
  std::map<int32_t, uint64_t> hash_of;
  for (int32_t i = 0; i < kBlocks; ++i) free_list.push_back(i);
  std::mt19937 rng(5);
  auto forget = [&](int32_t blk) {
    auto it = hash_of.find(blk);
    if (it == hash_of.end()) return;
    published.erase(it->second);
    hash_of.erase(it);
  };
  for (int step = 0; step < 200000; ++step) {
    const int op = int(rng() % 5);
    if (op == 0) {
      const int32_t got = b.allocate();
      if (free_list.empty()) {
        ASSERT_EQ(got, -1);
      } else {
        ASSERT_EQ(got, free_list.front());
        free_list.pop_front();
        forget(got);
        refs[got] = 1;
      }
    } else if (!refs.empty() && op <= 2) {
      auto it = refs.begin();
      std::advance(it, rng() % refs.size());
      const int32_t blk = it->first;
      if (op == 1) {
        b.retain(blk);
        ++it->second;
      } else {
        b.release(blk);
        if (--it->second == 0) {
          refs.erase(it);
          free_list.push_back(blk);
        }
      }
    } else if (!refs.empty() && op == 3) {
      auto it = refs.begin();
      std::advance(it, rng() % refs.size());
      const uint64_t h = rng() % 64;  // small hash space: collisions with published blocks
      const bool expect = hash_of.count(it->first) ? hash_of[it->first] == h : published.count(h) == 0;
      ASSERT_EQ(b.publish(it->first, h), expect);
      if (expect && !hash_of.count(it->first)) {
        published[h] = it->first;
        hash_of[it->first] = h;
      }
    } else {
      const uint64_t h = rng() % 64;
      const int32_t got = b.lookup(h);
      auto it = published.find(h);
      ASSERT_EQ(got, it == published.end() ? -1 : it->second);
      if (got >= 0) {
        if (refs.count(got) == 0) free_list.erase(std::find(free_list.begin(), free_list.end(), got));
        ++refs[got];
      }
    }
    ASSERT_EQ(b.free_count(), int32_t(free_list.size()));
  }
  for (const auto& [blk, n] : refs) EXPECT_EQ(b.ref_count(blk), n);
}

}  // namespace
}  // namespace ember::llm
