// The CUDA backend's host-side planning, without a GPU (runs in CI): the device arena's lifetime
// plan never overlaps two values alive at the same instruction and reuses memory, and the (T, S)
// buckets of an LLM step cover every step shape with a tight bucket for decode steps; the layout
// as MemoryRequirements lists every byte under the purposes runner --info prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/plan.h"
#include "backends/cuda/register.h"
#include "exporter/importers/hf_llm/step_graph.h"
#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"

namespace ember {
namespace {

std::vector<uint8_t> ExportStep(int64_t max_seqs, int64_t max_tokens, int64_t max_context) {
  exporter::hf::StepOptions options;
  options.max_seqs = max_seqs;
  options.max_tokens = max_tokens;
  options.max_context = max_context;
  options.block_size = 16;
  const char* env = std::getenv("EMBER_LLM_CHECKPOINTS");
  const std::string dir = std::string(env != nullptr ? env : EMBER_LLM_CHECKPOINTS) + "/qwen3_f32";
  return testing::export_program(exporter::hf::import_step(dir, options).graph).program.bytes;
}

uint64_t Align256(uint64_t n) { return (n + 255) / 256 * 256; }
constexpr uint32_t kMaxBucketsForTest = 256;

TEST(CudaPlan, ValuesAliveTogetherNeverShareBytesAndMemoryIsReused) {
  const std::vector<uint8_t> bytes = ExportStep(4, 64, 64);
  const fb::Graph* g = testing::program_of(bytes)->methods()->Get(0)->graph();
  const GraphView graph(g, Span<const SegmentData>());
  const uint32_t n = graph.value_count();
  std::vector<uint64_t> offsets(n, UINT64_MAX);
  const uint64_t arena = backends::cuda::plan_device_values(graph, offsets.data());
  // Lifetimes from the instructions, independently of the planner.
  std::vector<uint32_t> first(n, UINT32_MAX), last(n, 0);
  for (uint32_t i = 0; i < graph.instruction_count(); ++i) {
    const fb::KernelCall* call = g->instructions()->Get(i)->args_as_KernelCall();
    ASSERT_NE(call, nullptr);
    auto touch = [&](int64_t v) {
      if (v < 0) return;
      first[size_t(v)] = std::min(first[size_t(v)], i);
      last[size_t(v)] = std::max(last[size_t(v)], i);
    };
    for (int32_t v : *call->inputs()) touch(v);
    for (uint32_t v : *call->outputs()) touch(v);
  }
  std::vector<uint32_t> internal;
  uint64_t total = 0;
  for (uint32_t v = 0; v < n; ++v) {
    if (graph.is_io(v) || graph.value(v).storage_type() != fb::Storage::PlannedStorage) continue;
    ASSERT_NE(offsets[v], UINT64_MAX) << "value " << v << " was not placed";
    EXPECT_EQ(offsets[v] % 256, 0u);
    EXPECT_LE(offsets[v] + Align256(graph.value(v).nbytes()), arena) << "value " << v;
    internal.push_back(v);
    total += Align256(graph.value(v).nbytes());
  }
  ASSERT_GT(internal.size(), 20u);
  int pairs = 0;
  for (size_t a = 0; a < internal.size(); ++a) {
    for (size_t b = a + 1; b < internal.size(); ++b) {
      const uint32_t x = internal[a], y = internal[b];
      if (last[x] < first[y] || last[y] < first[x]) continue;  // never alive together
      ++pairs;
      const uint64_t xe = offsets[x] + Align256(graph.value(x).nbytes());
      const uint64_t ye = offsets[y] + Align256(graph.value(y).nbytes());
      EXPECT_TRUE(xe <= offsets[y] || ye <= offsets[x]) << "values " << x << " and " << y << " overlap";
    }
  }
  EXPECT_GT(pairs, 0);
  EXPECT_LT(arena, total) << "no reuse";
  // Deterministic: plan_memory() and init() must agree.
  std::vector<uint64_t> again(n, UINT64_MAX);
  EXPECT_EQ(backends::cuda::plan_device_values(graph, again.data()), arena);
  for (uint32_t v : internal) EXPECT_EQ(again[v], offsets[v]);
}

TEST(CudaPlan, BucketsCoverEveryStepAndFitDecodeTightly) {
  const std::vector<uint8_t> bytes = ExportStep(512, 8192, 128);
  const fb::Graph* g = testing::program_of(bytes)->methods()->Get(0)->graph();
  const GraphView graph(g, Span<const SegmentData>());
  int64_t t[256], s[256];
  const uint32_t count = backends::cuda::bucket_count(graph, t, s, 256);
  EXPECT_EQ(count, 71u);
  ASSERT_GT(count, 0u);
  auto pick = [&](int64_t tokens, int64_t seqs) -> int {  // the backend's rule: the first that holds it
    for (uint32_t b = 0; b < count; ++b) {
      if (t[b] >= tokens && s[b] >= seqs) return static_cast<int>(b);
    }
    return -1;
  };
  for (int64_t tokens = 1; tokens <= 8192; tokens = tokens < 64 ? tokens + 1 : tokens + 37) {
    for (int64_t seqs = 1; seqs <= std::min<int64_t>(tokens, 512); seqs = seqs < 16 ? seqs + 1 : seqs * 2 - 1) {
      const int b = pick(tokens, seqs);
      ASSERT_GE(b, 0) << "T=" << tokens << " S=" << seqs << " has no bucket";
      EXPECT_LT(t[b], 2 * tokens) << "T=" << tokens;
    }
    // A decode step (one token per sequence) gets S within 2x of its own.
    if (tokens <= 512) {
      const int b = pick(tokens, tokens);
      ASSERT_GE(b, 0);
      EXPECT_LT(s[b], 2 * tokens) << "decode of " << tokens;
    }
  }
  // Not an LLM step: one graph at static shapes, or none (launched per call) with other symbols.
  const fb::Graph* mlp = testing::program_of(testing::example("mlp").program.bytes)->methods()->Get(0)->graph();
  const GraphView mlp_view(mlp, Span<const SegmentData>());
  const bool symbolic = mlp->symbols() != nullptr && mlp->symbols()->size() > 0;
  EXPECT_EQ(backends::cuda::bucket_count(mlp_view, t, s, 256), symbolic ? 0u : 1u);
}

struct Part {
  std::string purpose;
  MemoryDomain domain;
  uint64_t bytes;
  bool operator==(const Part& o) const { return purpose == o.purpose && domain == o.domain && bytes == o.bytes; }
};

std::vector<Part> PartsOf(const MemoryRequirements& m) {
  std::vector<Part> parts;
  for (const MemoryPart& p : m.parts()) parts.push_back(Part{p.purpose, p.domain, p.bytes});
  return parts;
}

uint64_t Listed(const MemoryRequirements& m, MemoryDomain domain) {
  uint64_t sum = 0;
  for (const MemoryPart& p : m.parts()) sum += p.domain == domain ? p.bytes : 0;
  return sum;
}

void PrintTo(const Part& p, std::ostream* os) { *os << p.purpose << " " << to_string(p.domain) << " " << p.bytes; }

TEST(CudaPlan, RequirementsListEveryByteOfTheLayoutByPurpose) {
  constexpr uint64_t kHandle = 4096;  // the DelegateHandle's size is the backend's; any value here
  const std::vector<uint8_t> bytes = ExportStep(4, 64, 64);
  const GraphView graph(testing::program_of(bytes)->methods()->Get(0)->graph(), Span<const SegmentData>());
  backends::cuda::Layout l;
  ErrorContext ctx;
  ASSERT_TRUE(backends::cuda::plan(graph, &l, &ctx).is_ok()) << ctx.message;
  const MemoryRequirements m = backends::cuda::requirements(l, kHandle);
  // The totals are the layout's (what init() allocates), and the parts add up to them.
  EXPECT_EQ(m.host_bytes, kHandle + l.host_bytes);
  EXPECT_EQ(m.pinned_bytes, l.pinned_bytes);
  EXPECT_EQ(m.device_bytes, l.device_bytes);
  for (MemoryDomain d : {MemoryDomain::Host, MemoryDomain::PinnedHost, MemoryDomain::Device}) {
    EXPECT_EQ(Listed(m, d), m.total(d)) << to_string(d);
    EXPECT_EQ(m.unlisted(d), 0u) << to_string(d);
  }
  // The step has linears (the cuBLASLt workspace) and kernels with scratch: every purpose shows.
  ASSERT_GT(l.constant_bytes, 0u);
  ASSERT_GT(l.scratch_bytes, 0u);
  const std::vector<Part> expected = {
      {"handle", MemoryDomain::Host, kHandle},
      {"runner", MemoryDomain::Host, l.host_bytes},
      {"weights", MemoryDomain::Device, l.constant_bytes},
      {"values", MemoryDomain::Device, l.value_bytes},
      {"io staging", MemoryDomain::Device, l.io_bytes},
      {"scratch", MemoryDomain::Device, l.scratch_bytes},
      {"cublaslt workspace", MemoryDomain::Device, 32ull << 20},
      {"status", MemoryDomain::Device, 256},
      {"io staging", MemoryDomain::PinnedHost, l.io_bytes},
      {"status", MemoryDomain::PinnedHost, 256},
  };
  EXPECT_EQ(PartsOf(m), expected);
  // One CUDA graph per (T, S) bucket; counted, not in the bytes.
  int64_t t[kMaxBucketsForTest], s[kMaxBucketsForTest];
  const uint32_t buckets = backends::cuda::bucket_count(graph, t, s, kMaxBucketsForTest);
  EXPECT_GT(buckets, 1u);
  EXPECT_EQ(m.graph_count, buckets);
  EXPECT_TRUE(m == backends::cuda::requirements(l, kHandle));  // deterministic: plan_memory() == init()
  EXPECT_FALSE(m == backends::cuda::requirements(l, kHandle + 64));
}

TEST(CudaPlan, RequirementsListTheWorkspaceOnlyForLinearsAndAGraphPerBucket) {
  // cnn: static shapes (one graph), a linear; paged_attention: symbolic, eager, no linear.
  bool saw_linear = false, saw_no_linear = false;
  for (const char* name : {"cnn", "paged_attention"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t>& bytes = testing::example(name).program.bytes;
    const GraphView graph(testing::program_of(bytes)->methods()->Get(0)->graph(), Span<const SegmentData>());
    backends::cuda::Layout l;
    ErrorContext ctx;
    ASSERT_TRUE(backends::cuda::plan(graph, &l, &ctx).is_ok()) << ctx.message;
    const MemoryRequirements m = backends::cuda::requirements(l, 64);
    bool has_linear = false;
    for (uint32_t i = 0; i < graph.instruction_count(); ++i) {
      const fb::KernelCall* call = graph.graph().instructions()->Get(i)->args_as_KernelCall();
      has_linear = has_linear || (call != nullptr && call->op() == fb::OpCode::Linear);
    }
    (has_linear ? saw_linear : saw_no_linear) = true;
    bool listed_workspace = false;
    for (const MemoryPart& p : m.parts()) {
      listed_workspace = listed_workspace || std::string(p.purpose) == "cublaslt workspace";
      EXPECT_GT(p.bytes, 0u) << p.purpose;  // a zero-byte purpose is not listed
    }
    EXPECT_EQ(listed_workspace, has_linear);
    EXPECT_EQ(Listed(m, MemoryDomain::Device), l.device_bytes);
    EXPECT_EQ(Listed(m, MemoryDomain::PinnedHost), l.pinned_bytes);
    int64_t t[kMaxBucketsForTest], s[kMaxBucketsForTest];
    const uint32_t buckets = backends::cuda::bucket_count(graph, t, s, kMaxBucketsForTest);
    EXPECT_EQ(m.graph_count, l.buckets.eager ? 0u : buckets);
    EXPECT_EQ(m.graph_count, std::string(name) == "cnn" ? 1u : 0u);
  }
  EXPECT_TRUE(saw_linear && saw_no_linear);
}

}  // namespace
}  // namespace ember
