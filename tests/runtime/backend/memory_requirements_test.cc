// MemoryRequirements (runtime/backend/backend.h): parts by purpose and domain that add to the
// totals, merging across delegates, equality that compares the breakdown, the fixed capacity, and
// the formatting runner --info and the CUDA backend's log share.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "runtime/backend/backend.h"

namespace ember {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

std::string Format(const MemoryRequirements& m, MemoryDomain domain) {
  char line[512];
  return format_memory(m, domain, line, sizeof(line));
}

std::string Bytes(uint64_t bytes) {
  char text[32];
  return format_bytes(bytes, text, sizeof(text));
}

TEST(MemoryRequirementsTest, AddPartAddsToItsDomainsTotalAndMergesByPurposeAndDomain) {
  MemoryRequirements m;
  m.add_part("weights", MemoryDomain::Device, 1000);
  m.add_part("status", MemoryDomain::Device, 256);
  m.add_part("status", MemoryDomain::PinnedHost, 256);  // same purpose, other domain: its own part
  m.add_part("weights", MemoryDomain::Device, 24);      // merged
  m.add_part("handle", MemoryDomain::Host, 64);
  EXPECT_EQ(m.device_bytes, 1280u);
  EXPECT_EQ(m.pinned_bytes, 256u);
  EXPECT_EQ(m.host_bytes, 64u);
  EXPECT_EQ(m.total(MemoryDomain::Device), 1280u);
  ASSERT_EQ(m.parts().size(), 4u);
  EXPECT_STREQ(m.parts()[0].purpose, "weights");
  EXPECT_EQ(m.parts()[0].domain, MemoryDomain::Device);
  EXPECT_EQ(m.parts()[0].bytes, 1024u);
  EXPECT_STREQ(m.parts()[1].purpose, "status");
  EXPECT_EQ(m.parts()[1].domain, MemoryDomain::Device);
  EXPECT_STREQ(m.parts()[2].purpose, "status");
  EXPECT_EQ(m.parts()[2].domain, MemoryDomain::PinnedHost);
  EXPECT_EQ(m.parts()[3].bytes, 64u);
  for (MemoryDomain d : {MemoryDomain::Host, MemoryDomain::PinnedHost, MemoryDomain::Device}) {
    EXPECT_EQ(m.unlisted(d), 0u) << to_string(d);
  }
}

TEST(MemoryRequirementsTest, ZeroBytesListNothing) {
  MemoryRequirements m;
  m.add_part("cublaslt workspace", MemoryDomain::Device, 0);
  EXPECT_EQ(m.parts().size(), 0u);
  EXPECT_TRUE(m == MemoryRequirements());
}

TEST(MemoryRequirementsTest, PurposesMatchByContentNotAddress) {
  static const char kWeights[] = "weights";  // another array than the literal below
  MemoryRequirements a, b;
  a.add_part(kWeights, MemoryDomain::Device, 10);
  a.add_part("weights", MemoryDomain::Device, 5);
  ASSERT_EQ(a.parts().size(), 1u);
  EXPECT_EQ(a.parts()[0].bytes, 15u);
  b.add_part("weights", MemoryDomain::Device, 15);
  EXPECT_TRUE(a == b);
}

TEST(MemoryRequirementsTest, SumMergesPartsByPurposeAndAddsGraphCounts) {
  MemoryRequirements a, b;
  a.add_part("weights", MemoryDomain::Device, 100);
  a.add_part("values", MemoryDomain::Device, 10);
  a.graph_count = 3;
  b.add_part("values", MemoryDomain::Device, 20);
  b.add_part("state", MemoryDomain::Device, 7);
  b.add_part("handle", MemoryDomain::Host, 5);
  b.graph_count = 2;
  a += b;
  EXPECT_EQ(a.device_bytes, 137u);
  EXPECT_EQ(a.host_bytes, 5u);
  EXPECT_EQ(a.graph_count, 5u);
  ASSERT_EQ(a.parts().size(), 4u);
  EXPECT_STREQ(a.parts()[1].purpose, "values");
  EXPECT_EQ(a.parts()[1].bytes, 30u);
  EXPECT_STREQ(a.parts()[2].purpose, "state");
  EXPECT_STREQ(a.parts()[3].purpose, "handle");
  // Totals set directly (a backend that lists nothing) are summed and stay unlisted.
  MemoryRequirements totals_only;
  totals_only.device_bytes = 1000;
  a += totals_only;
  EXPECT_EQ(a.device_bytes, 1137u);
  EXPECT_EQ(a.unlisted(MemoryDomain::Device), 1000u);
  EXPECT_EQ(a.unlisted(MemoryDomain::Host), 0u);
}

TEST(MemoryRequirementsTest, EqualityComparesTheBreakdownNotTheOrder) {
  MemoryRequirements a, b;
  a.add_part("weights", MemoryDomain::Device, 100);
  a.add_part("values", MemoryDomain::Device, 20);
  b.add_part("values", MemoryDomain::Device, 20);
  b.add_part("weights", MemoryDomain::Device, 100);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);

  MemoryRequirements swapped;  // same total, bytes moved between purposes
  swapped.add_part("weights", MemoryDomain::Device, 20);
  swapped.add_part("values", MemoryDomain::Device, 100);
  EXPECT_EQ(swapped.device_bytes, a.device_bytes);
  EXPECT_FALSE(a == swapped);

  MemoryRequirements renamed;  // same bytes, one purpose named differently
  renamed.add_part("weights", MemoryDomain::Device, 100);
  renamed.add_part("scratch", MemoryDomain::Device, 20);
  EXPECT_FALSE(a == renamed);
  EXPECT_FALSE(renamed == a);

  MemoryRequirements unlisted;  // same total, nothing listed
  unlisted.device_bytes = 120;
  EXPECT_FALSE(a == unlisted);
  EXPECT_FALSE(unlisted == a);

  MemoryRequirements more_graphs = a;
  more_graphs.graph_count = 1;
  EXPECT_FALSE(a == more_graphs);
}

TEST(MemoryRequirementsTest, PurposesBeyondTheCapacityCountInTheTotalOnly) {
  static const char* const kPurposes[] = {"p0", "p1", "p2",  "p3",  "p4",  "p5",  "p6",  "p7",  "p8",
                                          "p9", "p10", "p11", "p12", "p13", "p14", "p15", "p16", "p17"};
  static_assert(sizeof(kPurposes) / sizeof(kPurposes[0]) == MemoryRequirements::kMaxMemoryParts + 2);
  MemoryRequirements m;
  for (uint32_t i = 0; i < MemoryRequirements::kMaxMemoryParts + 2; ++i) {
    m.add_part(kPurposes[i], MemoryDomain::Device, 1ull << i);
  }
  EXPECT_EQ(m.parts().size(), MemoryRequirements::kMaxMemoryParts);
  EXPECT_EQ(m.device_bytes, (1ull << 18) - 1);
  EXPECT_EQ(m.unlisted(MemoryDomain::Device), (1ull << 16) + (1ull << 17));
  m.add_part("p3", MemoryDomain::Device, 8);  // a listed purpose still merges when full
  EXPECT_EQ(m.parts()[3].bytes, 16u);
  EXPECT_EQ(m.unlisted(MemoryDomain::Device), (1ull << 16) + (1ull << 17));
}

TEST(MemoryRequirementsTest, FormatBytesPicksTheLargestUnitBelowTheValue) {
  EXPECT_EQ(Bytes(0), "0 B");
  EXPECT_EQ(Bytes(256), "256 B");
  EXPECT_EQ(Bytes(1023), "1023 B");
  EXPECT_EQ(Bytes(1024), "1.0 KiB");
  EXPECT_EQ(Bytes(1536), "1.5 KiB");
  EXPECT_EQ(Bytes(kMiB - 1), "1024.0 KiB");  // rounding of the figure, not of the unit
  EXPECT_EQ(Bytes(120 * kMiB), "120.0 MiB");
  EXPECT_EQ(Bytes(kGiB), "1.0 GiB");
  EXPECT_EQ(Bytes(15 * kGiB + kGiB / 5), "15.2 GiB");
}

TEST(MemoryRequirementsTest, FormatMemoryListsOneDomainsPartsThenTheUnlistedBytes) {
  MemoryRequirements m;
  m.add_part("weights", MemoryDomain::Device, 14 * kGiB + kGiB / 5);
  m.add_part("values", MemoryDomain::Device, 120 * kMiB);
  m.add_part("status", MemoryDomain::Device, 256);
  m.add_part("io staging", MemoryDomain::PinnedHost, 3 * kKiB / 2);
  m.host_bytes = 2048;  // totals only
  EXPECT_EQ(Format(m, MemoryDomain::Device), "device 14.3 GiB: weights 14.2 GiB, values 120.0 MiB, status 256 B");
  EXPECT_EQ(Format(m, MemoryDomain::PinnedHost), "pinned 1.5 KiB: io staging 1.5 KiB");
  EXPECT_EQ(Format(m, MemoryDomain::Host), "host 2.0 KiB");
  m.device_bytes += kKiB;  // a byte count no part explains
  EXPECT_EQ(Format(m, MemoryDomain::Device),
            "device 14.3 GiB: weights 14.2 GiB, values 120.0 MiB, status 256 B, other 1.0 KiB");
  EXPECT_EQ(Format(MemoryRequirements(), MemoryDomain::PinnedHost), "pinned 0 B");
}

TEST(MemoryRequirementsTest, FormatMemoryCutsAtTheBufferAndAlwaysTerminates) {
  MemoryRequirements m;
  m.add_part("weights", MemoryDomain::Device, kMiB);
  m.add_part("values", MemoryDomain::Device, kMiB);
  char small[16];
  std::memset(small, 'x', sizeof(small));
  EXPECT_EQ(format_memory(m, MemoryDomain::Device, small, sizeof(small)), small);
  EXPECT_EQ(std::string(small), "device 2.0 MiB:");  // 15 characters and the NUL
  char one[1] = {'x'};
  format_memory(m, MemoryDomain::Device, one, sizeof(one));
  EXPECT_EQ(one[0], '\0');
  char none[1] = {'x'};
  EXPECT_EQ(format_memory(m, MemoryDomain::Device, none, 0), none);
  EXPECT_EQ(none[0], 'x');  // capacity 0: nothing written
  char bytes[4];
  EXPECT_EQ(std::string(format_bytes(1536, bytes, sizeof(bytes))), "1.5");
}

}  // namespace
}  // namespace ember
