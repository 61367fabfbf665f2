#include "runtime/core/memory_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ember {
namespace {

TEST(BumpAllocatorTest, AllocatesAlignedPiecesInOrder) {
  alignas(64) uint8_t buffer[1024];
  BumpAllocator alloc(buffer);
  EXPECT_EQ(alloc.capacity(), 1024u);
  void* a = alloc.allocate(3, 1);
  EXPECT_EQ(a, buffer);
  EXPECT_EQ(alloc.used(), 3u);
  void* b = alloc.allocate(8, 16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 16, 0u);
  EXPECT_EQ(b, buffer + 16);
  void* c = alloc.allocate(1, 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 64, 0u);
  EXPECT_EQ(c, buffer + 64);
  EXPECT_EQ(alloc.used(), 65u);
  EXPECT_EQ(alloc.remaining().size(), 1024u - 65u);
  EXPECT_EQ(alloc.remaining().data(), buffer + 65);
}

TEST(BumpAllocatorTest, EveryPowerOfTwoAlignmentIsHonoured) {
  alignas(256) uint8_t buffer[4096];
  BumpAllocator alloc(buffer);
  for (size_t align = 1; align <= 256; align *= 2) {
    alloc.allocate(1, 1);  // misalign
    void* p = alloc.allocate(5, align);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << align;
  }
}

TEST(BumpAllocatorTest, ExhaustionReturnsNullAndKeepsState) {
  alignas(16) uint8_t buffer[64];
  BumpAllocator alloc(buffer);
  ASSERT_NE(alloc.allocate(60, 1), nullptr);
  EXPECT_EQ(alloc.allocate(5, 1), nullptr);
  EXPECT_EQ(alloc.used(), 60u);
  EXPECT_NE(alloc.allocate(4, 1), nullptr);  // exactly fills it
  EXPECT_EQ(alloc.used(), 64u);
  EXPECT_EQ(alloc.allocate(1, 1), nullptr);
  EXPECT_EQ(alloc.allocate(SIZE_MAX, 1), nullptr);
  EXPECT_EQ(alloc.used(), 64u);
}

TEST(BumpAllocatorTest, AlignmentPaddingBeyondEndFails) {
  alignas(64) uint8_t buffer[70];
  BumpAllocator alloc(buffer);
  ASSERT_NE(alloc.allocate(65, 1), nullptr);
  EXPECT_EQ(alloc.allocate(1, 64), nullptr);  // next 64-aligned address is past the end
  EXPECT_EQ(alloc.used(), 65u);
}

TEST(BumpAllocatorTest, HugeSizesDoNotOverflow) {
  alignas(16) uint8_t buffer[128];
  BumpAllocator alloc(buffer);
  alloc.allocate(3, 1);
  EXPECT_EQ(alloc.allocate(SIZE_MAX - 2, 1), nullptr);
  EXPECT_EQ(alloc.allocate(SIZE_MAX, 16), nullptr);
  EXPECT_EQ(alloc.allocate_array<uint64_t>(SIZE_MAX / 4), nullptr);  // count * 8 overflows
  EXPECT_EQ(alloc.used(), 3u);
}

TEST(BumpAllocatorTest, AllocateArrayAligns) {
  alignas(64) uint8_t buffer[256];
  BumpAllocator alloc(buffer);
  alloc.allocate(1, 1);
  double* d = alloc.allocate_array<double>(4);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 16, 0u);
  EXPECT_EQ(alloc.allocate_array<double>(100), nullptr);
}

TEST(BumpAllocatorTest, ResetFreesEverythingAndPeakRemembers) {
  alignas(16) uint8_t buffer[256];
  BumpAllocator alloc(buffer);
  alloc.allocate(100, 1);
  alloc.allocate(50, 1);
  EXPECT_EQ(alloc.peak(), 150u);
  alloc.reset();
  EXPECT_EQ(alloc.used(), 0u);
  EXPECT_EQ(alloc.allocate(10, 1), buffer);
  EXPECT_EQ(alloc.peak(), 150u);
  alloc.allocate(200, 1);
  EXPECT_EQ(alloc.peak(), 210u);
}

TEST(BumpAllocatorTest, ZeroSizeAndEmptyBuffer) {
  BumpAllocator empty;
  EXPECT_EQ(empty.capacity(), 0u);
  EXPECT_EQ(empty.allocate(1, 1), nullptr);
  alignas(16) uint8_t buffer[16];
  BumpAllocator alloc(buffer);
  EXPECT_NE(alloc.allocate(0, 1), nullptr);
  EXPECT_EQ(alloc.used(), 0u);
}

}  // namespace
}  // namespace ember
