#include "runtime/core/data_loader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace ember {
namespace {

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131) ^ (i >> 8));
  return v;
}

// Checks every loader the same way: contents, alignment, range errors.
void CheckLoader(DataLoader& loader, const std::vector<uint8_t>& expected) {
  ASSERT_EQ(loader.size(), expected.size());
  const size_t n = expected.size();
  const size_t offsets[] = {0, 1, 3, 63, 64, 65, 4095, 4096, n / 2, n - 1, n};
  for (size_t offset : offsets) {
    for (size_t alignment : {size_t{1}, size_t{8}, size_t{64}, size_t{4096}, size_t{65536}}) {
      const size_t size = n - offset < 100 ? n - offset : 100;
      Result<FreeableBuffer> b = loader.load(offset, size, alignment);
      ASSERT_TRUE(b.is_ok()) << offset << " " << alignment;
      ASSERT_EQ(b->size(), size);
      if (size > 0) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % alignment, 0u) << offset << " " << alignment;
        EXPECT_EQ(std::memcmp(b->data(), expected.data() + offset, size), 0) << offset;
      }
    }
  }
  // Whole file at once.
  Result<FreeableBuffer> all = loader.load(0, n, 64);
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(std::memcmp(all->data(), expected.data(), n), 0);
  // Ranges outside the data.
  EXPECT_EQ(loader.load(0, n + 1, 1).error(), Error::InvalidArgument);
  EXPECT_EQ(loader.load(n, 1, 1).error(), Error::InvalidArgument);
  EXPECT_EQ(loader.load(n + 1, 0, 1).error(), Error::InvalidArgument);
  EXPECT_EQ(loader.load(UINT64_MAX, 2, 1).error(), Error::InvalidArgument);
  EXPECT_EQ(loader.load(1, SIZE_MAX, 1).error(), Error::InvalidArgument);
  EXPECT_EQ(loader.load(UINT64_MAX - 1, SIZE_MAX, 1).error(), Error::InvalidArgument);
  // Empty range at the end is fine.
  EXPECT_TRUE(loader.load(n, 0, 1).is_ok());
}

TEST(BufferDataLoaderTest, ContentsAlignmentAndRanges) {
  const std::vector<uint8_t> data = Pattern(70000);
  BufferDataLoader loader(data.data(), data.size());
  EXPECT_TRUE(loader.is_zero_copy());
  CheckLoader(loader, data);
}

TEST(BufferDataLoaderTest, AlignedRangesAreViewsMisalignedAreCopies) {
  alignas(64) static uint8_t data[256];
  for (int i = 0; i < 256; ++i) data[i] = static_cast<uint8_t>(i);
  BufferDataLoader loader(data, sizeof(data));
  Result<FreeableBuffer> view = loader.load(64, 64, 64);
  ASSERT_TRUE(view.is_ok());
  EXPECT_EQ(view->data(), data + 64);
  Result<FreeableBuffer> copy = loader.load(65, 10, 64);
  ASSERT_TRUE(copy.is_ok());
  EXPECT_NE(copy->data(), data + 65);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy->data()) % 64, 0u);
  EXPECT_EQ(copy->data()[0], 65);
}

TEST(FileDataLoaderTest, ContentsAlignmentAndRanges) {
  const std::vector<uint8_t> data = Pattern(70000);
  testing::TempFile file(data);
  ASSERT_TRUE(file.ok());
  Result<FileDataLoader> loader = FileDataLoader::open(file.path());
  ASSERT_TRUE(loader.is_ok());
  EXPECT_FALSE(loader->is_zero_copy());
  CheckLoader(*loader, data);
}

TEST(FileDataLoaderTest, MissingFileIsNotFoundWithMessage) {
  testing::QuietLogs quiet;
  ErrorContext ctx;
  Result<FileDataLoader> loader = FileDataLoader::open("/nonexistent/dir/model.pte", &ctx);
  ASSERT_FALSE(loader.is_ok());
  EXPECT_EQ(loader.error(), Error::NotFound);
  EXPECT_EQ(ctx.code, Error::NotFound);
  EXPECT_NE(std::strstr(ctx.message, "/nonexistent/dir/model.pte"), nullptr) << ctx.message;
}

TEST(FileDataLoaderTest, DirectoryIsRejected) {
  testing::QuietLogs quiet;
  ErrorContext ctx;
  Result<FileDataLoader> loader = FileDataLoader::open("/", &ctx);
  ASSERT_FALSE(loader.is_ok());
  EXPECT_EQ(loader.error(), Error::InvalidArgument);
  EXPECT_GT(std::strlen(ctx.message), 0u);
}

// A FIFO without a writer would block a plain open() forever (ctest's TIMEOUT catches that); both
// loaders refuse it, and a device, by kind.
TEST(DataLoaderTest, FifoAndDeviceAreRefusedWithoutBlocking) {
  testing::QuietLogs quiet;
  const std::string fifo = ::testing::TempDir() + "ember_data_loader_fifo_" + std::to_string(::getpid());
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  {
    ErrorContext ctx;
    Result<FileDataLoader> loader = FileDataLoader::open(fifo.c_str(), &ctx);
    ASSERT_FALSE(loader.is_ok());
    EXPECT_EQ(loader.error(), Error::InvalidArgument);
    EXPECT_EQ(std::string(ctx.message), "'" + fifo + "' is not a regular file (FIFO)");
  }
  {
    ErrorContext ctx;
    Result<MmapDataLoader> loader = MmapDataLoader::open(fifo.c_str(), &ctx);
    ASSERT_FALSE(loader.is_ok());
    EXPECT_EQ(std::string(ctx.message), "'" + fifo + "' is not a regular file (FIFO)");
  }
  ::unlink(fifo.c_str());
  ErrorContext ctx;
  Result<FileDataLoader> zero = FileDataLoader::open("/dev/zero", &ctx);
  ASSERT_FALSE(zero.is_ok());
  EXPECT_EQ(std::string(ctx.message), "'/dev/zero' is not a regular file (character device)");
}

TEST(FileDataLoaderTest, EmptyFile) {
  testing::TempFile file(std::vector<uint8_t>{});
  Result<FileDataLoader> loader = FileDataLoader::open(file.path());
  ASSERT_TRUE(loader.is_ok());
  EXPECT_EQ(loader->size(), 0u);
  EXPECT_TRUE(loader->load(0, 0, 64).is_ok());
  EXPECT_EQ(loader->load(0, 1, 1).error(), Error::InvalidArgument);
}

TEST(FileDataLoaderTest, MovedLoaderStillWorks) {
  const std::vector<uint8_t> data = Pattern(1000);
  testing::TempFile file(data);
  Result<FileDataLoader> opened = FileDataLoader::open(file.path());
  ASSERT_TRUE(opened.is_ok());
  FileDataLoader loader(std::move(opened).value());
  Result<FreeableBuffer> b = loader.load(10, 20, 8);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(std::memcmp(b->data(), data.data() + 10, 20), 0);
}

TEST(MmapDataLoaderTest, ContentsAlignmentAndRanges) {
  const std::vector<uint8_t> data = Pattern(70000);
  testing::TempFile file(data);
  Result<MmapDataLoader> loader = MmapDataLoader::open(file.path());
  ASSERT_TRUE(loader.is_ok());
  EXPECT_TRUE(loader->is_zero_copy());
  CheckLoader(*loader, data);
}

TEST(MmapDataLoaderTest, MissingFileIsNotFound) {
  testing::QuietLogs quiet;
  ErrorContext ctx;
  Result<MmapDataLoader> loader = MmapDataLoader::open("/nonexistent/model.pte", &ctx);
  ASSERT_FALSE(loader.is_ok());
  EXPECT_EQ(loader.error(), Error::NotFound);
  EXPECT_GT(std::strlen(ctx.message), 0u);
}

TEST(MmapDataLoaderTest, DirectoryIsRejected) {
  testing::QuietLogs quiet;
  Result<MmapDataLoader> loader = MmapDataLoader::open("/");
  ASSERT_FALSE(loader.is_ok());
  EXPECT_EQ(loader.error(), Error::InvalidArgument);
}

TEST(MmapDataLoaderTest, PageAlignedRangesAreZeroCopyViews) {
  const std::vector<uint8_t> data = Pattern(3 * 4096);
  testing::TempFile file(data);
  Result<MmapDataLoader> loader = MmapDataLoader::open(file.path());
  ASSERT_TRUE(loader.is_ok());
  Result<FreeableBuffer> a = loader->load(0, 100, 4096);
  Result<FreeableBuffer> b = loader->load(4096, 100, 4096);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(b->data() - a->data(), 4096);  // both views of one mapping
}

TEST(MmapDataLoaderTest, BuffersOutliveTheLoader) {
  const std::vector<uint8_t> data = Pattern(10000);
  testing::TempFile file(data);
  FreeableBuffer kept;
  {
    Result<MmapDataLoader> loader = MmapDataLoader::open(file.path());
    ASSERT_TRUE(loader.is_ok());
    Result<FreeableBuffer> b = loader->load(4096, 5000, 64);
    ASSERT_TRUE(b.is_ok());
    kept = std::move(b).value();
  }
  ASSERT_EQ(kept.size(), 5000u);
  EXPECT_EQ(std::memcmp(kept.data(), data.data() + 4096, 5000), 0);
  kept.free();
  EXPECT_EQ(kept.data(), nullptr);
}

TEST(MmapDataLoaderTest, EmptyFile) {
  testing::TempFile file(std::vector<uint8_t>{});
  Result<MmapDataLoader> loader = MmapDataLoader::open(file.path());
  ASSERT_TRUE(loader.is_ok());
  EXPECT_EQ(loader->size(), 0u);
  EXPECT_EQ(loader->load(0, 1, 1).error(), Error::InvalidArgument);
}

TEST(FreeableBufferTest, ReleaseRunsExactlyOnce) {
  static int calls = 0;
  calls = 0;
  {
    FreeableBuffer a(reinterpret_cast<const void*>(0x1000), 10, [](void*, const void*, size_t) { ++calls; });
    FreeableBuffer b(std::move(a));
    EXPECT_EQ(a.data(), nullptr);
    FreeableBuffer c;
    c = std::move(b);
    EXPECT_EQ(c.size(), 10u);
    EXPECT_EQ(calls, 0);
  }
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace ember
