// The CUDA backend's host-side planning, without a GPU (runs in CI): the device arena's lifetime
// plan never overlaps two values alive at the same instruction and reuses memory, the (T, S)
// buckets of an LLM step cover every step shape with a tight bucket for decode steps, the
// buckets.tokens / buckets.seqs compile specs replace the fixed rule's lists (from the exporter's
// --compile-spec through the .pte to plan_memory() and init()), and the layout as
// MemoryRequirements lists every byte under the purposes runner --info prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
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

// ---- buckets.tokens / buckets.seqs ------------------------------------------------------------------

// Compile specs as the runtime hands them over (key NUL-terminated, value bytes), owning their text.
class Specs {
 public:
  Specs(std::initializer_list<std::pair<std::string, std::string>> list) : text_(list) {
    for (const auto& [key, value] : text_) {
      specs_.push_back(CompileSpec{key.c_str(), Span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()),
                                                                    value.size())});
    }
  }
  Specs(const Specs&) = delete;
  Specs& operator=(const Specs&) = delete;
  Span<const CompileSpec> span() const { return Span<const CompileSpec>(specs_.data(), specs_.size()); }

 private:
  std::vector<std::pair<std::string, std::string>> text_;
  std::vector<CompileSpec> specs_;
};

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

Pairs PairsOf(const backends::cuda::Buckets& b) {
  Pairs out;
  for (uint32_t i = 0; i < b.count; ++i) out.emplace_back(b.t[i], b.s[i]);
  return out;
}

// A step graph (the whole method of a portable export), kept alive with its bytes.
struct StepGraph {
  std::vector<uint8_t> bytes;
  const fb::Graph* graph = nullptr;
  GraphView view() const { return GraphView(graph, Span<const SegmentData>()); }
};

const StepGraph& Step(int64_t max_seqs, int64_t max_tokens) {
  static std::vector<std::pair<std::pair<int64_t, int64_t>, std::unique_ptr<StepGraph>>> cache;
  for (const auto& [key, g] : cache) {
    if (key == std::make_pair(max_seqs, max_tokens)) return *g;
  }
  auto g = std::make_unique<StepGraph>();
  g->bytes = ExportStep(max_seqs, max_tokens, 64);
  g->graph = testing::program_of(g->bytes)->methods()->Get(0)->graph();
  cache.emplace_back(std::make_pair(max_seqs, max_tokens), std::move(g));
  return *cache.back().second;
}

TEST(CudaPlanSpecs, ListsReplaceThePowersOfTwoAndTheMaxIsAdded) {
  const GraphView graph = Step(8, 64).view();
  for (const auto& [tokens, seqs] : {std::make_pair("1,4,16", "1,2"), std::make_pair("1,4,16,64", "1,2,8")}) {
    SCOPED_TRACE(std::string(tokens) + " / " + seqs);
    const Specs specs{{"buckets.tokens", tokens}, {"buckets.seqs", seqs}};
    backends::cuda::Buckets b;
    ErrorContext ctx;
    ASSERT_TRUE(backends::cuda::plan_buckets(graph, specs.span(), &b, &ctx).is_ok()) << ctx.message;
    EXPECT_TRUE(b.llm);
    EXPECT_FALSE(b.eager);
    EXPECT_EQ(b.max_t, 64);
    EXPECT_EQ(b.max_s, 8);
    // T in {1, 4, 16, 64 (the max)} x S in {1, 2, 8 (the max)}; S beyond T once (T = 1 has S = 1 only).
    EXPECT_EQ(PairsOf(b), (Pairs{{1, 1}, {4, 1}, {4, 2}, {4, 8}, {16, 1}, {16, 2}, {16, 8}, {64, 1}, {64, 2}, {64, 8}}));
    // Every legal step (S <= T, S <= max S) has a bucket: the backend's pick, the first that holds it.
    for (int64_t t = 1; t <= 64; ++t) {
      for (int64_t s = 1; s <= std::min<int64_t>(t, 8); ++s) {
        bool held = false;
        for (uint32_t i = 0; i < b.count && !held; ++i) held = b.t[i] >= t && b.s[i] >= s;
        EXPECT_TRUE(held) << "T=" << t << " S=" << s;
      }
    }
  }
}

// backends/cuda/README.md's example (--max-seqs 64 --max-tokens 2048): 27 buckets, the fixed rule 50.
TEST(CudaPlanSpecs, ReadmeExample) {
  const GraphView graph = Step(64, 2048).view();
  const Specs specs{{"buckets.tokens", "1,2,4,8,16,32,64,256,2048"}, {"buckets.seqs", "1,4,16,64"}};
  backends::cuda::Buckets b, fixed;
  ErrorContext ctx;
  ASSERT_TRUE(backends::cuda::plan_buckets(graph, specs.span(), &b, &ctx).is_ok()) << ctx.message;
  EXPECT_EQ(b.count, 27u);
  ASSERT_TRUE(backends::cuda::plan_buckets(graph, Span<const CompileSpec>(), &fixed, &ctx).is_ok()) << ctx.message;
  EXPECT_EQ(fixed.count, 50u);
}

TEST(CudaPlanSpecs, OneListKeepsThePowersOfTwoOfTheOtherWithoutThinning) {
  const GraphView graph = Step(512, 8192).view();  // the fixed rule: 71 buckets, thinned past T = 64
  backends::cuda::Buckets b;
  ErrorContext ctx;
  const Specs tokens{{"buckets.tokens", "128"}};
  ASSERT_TRUE(backends::cuda::plan_buckets(graph, tokens.span(), &b, &ctx).is_ok()) << ctx.message;
  // T in {128, 8192}; S over 1, 2, 4, ..., 512, every one kept up to the first S >= T.
  EXPECT_EQ(PairsOf(b), (Pairs{{128, 1},   {128, 2},   {128, 4},   {128, 8},   {128, 16},   {128, 32},
                               {128, 64},  {128, 128}, {8192, 1},  {8192, 2},  {8192, 4},   {8192, 8},
                               {8192, 16}, {8192, 32}, {8192, 64}, {8192, 128}, {8192, 256}, {8192, 512}}));
  backends::cuda::Buckets c;
  const Specs seqs{{"buckets.seqs", "1"}};  // 512, the max, is added
  ASSERT_TRUE(backends::cuda::plan_buckets(graph, seqs.span(), &c, &ctx).is_ok()) << ctx.message;
  Pairs expected{{1, 1}};
  for (int64_t t = 2; t <= 8192; t *= 2) {
    expected.emplace_back(t, 1);
    expected.emplace_back(t, 512);
  }
  EXPECT_EQ(PairsOf(c), expected);
  EXPECT_EQ(c.count, 27u);
  // No specs: the fixed rule, unchanged.
  backends::cuda::Buckets d;
  ASSERT_TRUE(backends::cuda::plan_buckets(graph, Span<const CompileSpec>(), &d, &ctx).is_ok()) << ctx.message;
  EXPECT_EQ(d.count, 71u);
}

TEST(CudaPlanSpecs, BadListsAreInvalidArgumentNamingKeyValueAndWhy) {
  const GraphView graph = Step(8, 64).view();
  const std::string long_list = [] {  // 1..30 then 65: 83 characters, cut at 64 in the message
    std::string s;
    for (int i = 1; i <= 30; ++i) s += std::to_string(i) + ",";
    return s + "65";
  }();
  const std::string many = [] {  // 129 ascending entries <= 8192
    std::string s;
    for (int i = 1; i <= 129; ++i) {
      if (i > 1) s += ",";
      s += std::to_string(i);
    }
    return s;
  }();
  const struct {
    const char* key;
    std::string value;
    std::string message;
  } cases[] = {
      {"buckets.tokens", "", "cuda: compile spec buckets.tokens = '': empty (expected ascending positive integers, e.g. 1,2,4,8)"},
      {"buckets.tokens", "1,x,4", "cuda: compile spec buckets.tokens = '1,x,4': entry 'x' is not a positive integer"},
      {"buckets.tokens", "1,,4", "cuda: compile spec buckets.tokens = '1,,4': entry '' is not a positive integer"},
      {"buckets.tokens", "1,2,", "cuda: compile spec buckets.tokens = '1,2,': entry '' is not a positive integer"},
      {"buckets.seqs", "-1", "cuda: compile spec buckets.seqs = '-1': entry '-1' is not a positive integer"},
      {"buckets.seqs", " 2", "cuda: compile spec buckets.seqs = ' 2': entry ' 2' is not a positive integer"},
      {"buckets.seqs", "1.5", "cuda: compile spec buckets.seqs = '1.5': entry '1.5' is not a positive integer"},
      {"buckets.seqs", std::string("1,\x01"), "cuda: compile spec buckets.seqs = '1,?': entry '?' is not a positive integer"},
      {"buckets.tokens", "0,4", "cuda: compile spec buckets.tokens = '0,4': entry '0' is zero (buckets hold >= 1)"},
      {"buckets.tokens", "4,2", "cuda: compile spec buckets.tokens = '4,2': 2 after 4, not ascending"},
      {"buckets.tokens", "4,4", "cuda: compile spec buckets.tokens = '4,4': 4 after 4, not ascending"},
      {"buckets.tokens", "1,65", "cuda: compile spec buckets.tokens = '1,65': 65 is above the graph's max T (64)"},
      {"buckets.seqs", "1,9", "cuda: compile spec buckets.seqs = '1,9': 9 is above the graph's max S (8)"},
      {"buckets.tokens", "99999999999999999999999999",  // no overflow; the entry cut for the message
       "cuda: compile spec buckets.tokens = '99999999999999999999999999': 99999999999999999999... is above the "
       "graph's max T (64)"},
      {"buckets.tokens", long_list,
       "cuda: compile spec buckets.tokens = '" + long_list.substr(0, 64) + "...': 65 is above the graph's max T (64)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = '" + c.value + "'");
    const Specs specs{{c.key, c.value}};
    backends::cuda::Buckets b;
    ErrorContext ctx;
    const Status status = backends::cuda::plan_buckets(graph, specs.span(), &b, &ctx);
    EXPECT_EQ(status.code(), Error::InvalidArgument);
    EXPECT_EQ(std::string(ctx.message), c.message);
  }
  // More than kMaxBuckets entries in one list (on a graph whose max allows them).
  const GraphView big = Step(512, 8192).view();
  const Specs specs{{"buckets.tokens", many}};
  backends::cuda::Buckets b;
  ErrorContext ctx;
  EXPECT_EQ(backends::cuda::plan_buckets(big, specs.span(), &b, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(std::string(ctx.message),
            "cuda: compile spec buckets.tokens = '" + many.substr(0, 64) + "...': more than 128 entries");
}

TEST(CudaPlanSpecs, MoreThanMaxBucketsInAllIsInvalidArgumentNamingBothLists) {
  const GraphView graph = Step(512, 8192).view();
  // T over 1, 2, 4, ..., 8192 (14) x S in 1..20 and 512: 1 + 2 + 4 + 8 + 16 + 21 + 8 x 21 = 220.
  const Specs specs{{"buckets.seqs", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20"}};
  backends::cuda::Buckets b;
  ErrorContext ctx;
  EXPECT_EQ(backends::cuda::plan_buckets(graph, specs.span(), &b, &ctx).code(), Error::InvalidArgument);
  EXPECT_EQ(std::string(ctx.message),
            "cuda: compile specs buckets.tokens = (powers of two), buckets.seqs = "
            "'1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20' make 220 (T, S) buckets, more than 128");
  // Fewer T values bring it under: 3 T x 21 S (S beyond T once) = 1 + 21 + 21.
  const Specs fewer{{"buckets.seqs", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20"}, {"buckets.tokens", "1,64"}};
  ErrorContext ok;
  ASSERT_TRUE(backends::cuda::plan_buckets(graph, fewer.span(), &b, &ok).is_ok()) << ok.message;
  EXPECT_EQ(b.count, 43u);
}

TEST(CudaPlanSpecs, UnknownOrRepeatedKeysAndSpecsOnGraphsWithoutBuckets) {
  const GraphView step = Step(8, 64).view();
  const struct {
    std::vector<std::pair<std::string, std::string>> specs;
    std::string message;
  } cases[] = {
      {{{"buckets.token", "1"}}, "cuda: unknown compile spec 'buckets.token' (understood: buckets.tokens, buckets.seqs)"},
      {{{"buckets.seqs", "1"}, {"numerics", "fast"}},
       "cuda: unknown compile spec 'numerics' (understood: buckets.tokens, buckets.seqs)"},
      {{{"buckets.tokens", "1"}, {"buckets.tokens", "2"}}, "cuda: compile spec 'buckets.tokens' given twice for one delegate"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    std::vector<CompileSpec> specs;
    for (const auto& [key, value] : c.specs) {
      specs.push_back(CompileSpec{key.c_str(), Span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()),
                                                                   value.size())});
    }
    backends::cuda::Buckets b;
    ErrorContext ctx;
    const Status status =
        backends::cuda::plan_buckets(step, Span<const CompileSpec>(specs.data(), specs.size()), &b, &ctx);
    EXPECT_EQ(status.code(), Error::InvalidArgument);
    EXPECT_EQ(std::string(ctx.message), c.message);
  }
  // A graph that is not an LLM step has no buckets to choose: the spec is refused, not ignored.
  const fb::Graph* mlp = testing::program_of(testing::example("mlp").program.bytes)->methods()->Get(0)->graph();
  const fb::Graph* cnn = testing::program_of(testing::example("cnn").program.bytes)->methods()->Get(0)->graph();
  ASSERT_TRUE(mlp->symbols() != nullptr && mlp->symbols()->size() > 0);  // batch: launched per call
  ASSERT_TRUE(cnn->symbols() == nullptr || cnn->symbols()->size() == 0);
  const Specs specs{{"buckets.seqs", "1,2"}};
  backends::cuda::Buckets b;
  ErrorContext ctx;
  EXPECT_EQ(backends::cuda::plan_buckets(GraphView(mlp, Span<const SegmentData>()), specs.span(), &b, &ctx).code(),
            Error::InvalidArgument);
  EXPECT_EQ(std::string(ctx.message),
            "cuda: compile spec buckets.seqs applies to an LLM step graph; this delegate's graph has other symbolic "
            "inputs (launched per call, no buckets)");
  ErrorContext ctx2;
  EXPECT_EQ(backends::cuda::plan_buckets(GraphView(cnn, Span<const SegmentData>()), specs.span(), &b, &ctx2).code(),
            Error::InvalidArgument);
  EXPECT_EQ(std::string(ctx2.message),
            "cuda: compile spec buckets.seqs applies to an LLM step graph; this delegate's graph has no symbols (one "
            "graph at static shapes)");
}

// exporter --compile-spec cuda:KEY=VALUE -> the .pte's delegate -> the backend's plan_memory() and
// init() (both read the specs; a bad one fails before any device work, so this runs without a GPU).
TEST(CudaPlanSpecs, ExportedSpecsReachPlanMemoryAndInit) {
  exporter::hf::StepOptions step;
  step.max_seqs = 8;
  step.max_tokens = 64;
  step.max_context = 64;
  step.block_size = 16;
  const char* env = std::getenv("EMBER_LLM_CHECKPOINTS");
  const std::string dir = std::string(env != nullptr ? env : EMBER_LLM_CHECKPOINTS) + "/qwen3_f32";
  BackendRegistry registry;
  ASSERT_TRUE(backends::cuda::register_backend(registry).is_ok());
  const Backend* cuda = registry.find("cuda");
  ASSERT_NE(cuda, nullptr);
  RuntimeContext runtime;
  for (const std::string tokens : {"1,4,16", "1,65"}) {
    SCOPED_TRACE(tokens);
    exporter::ExportOptions options;
    options.backends = {"cuda"};
    options.manifest = &testing::builtin_manifest();
    options.method_name = "step";
    options.compile_specs = {{"cuda", "buckets.tokens", std::vector<uint8_t>(tokens.begin(), tokens.end())},
                             {"cuda", "buckets.seqs", {'1', ',', '2'}}};
    const std::vector<uint8_t> bytes =
        exporter::export_graph(exporter::hf::import_step(dir, step).graph, options).program.bytes;
    const fb::Method* method = testing::program_of(bytes)->methods()->Get(0);
    ASSERT_EQ(method->delegates()->size(), 1u);
    const fb::Delegate* d = method->delegates()->Get(0);
    ASSERT_EQ(d->backend_id()->str(), "cuda");
    ASSERT_EQ(d->compile_specs()->size(), 2u);
    CompileSpec specs[2];
    for (uint32_t i = 0; i < 2; ++i) {
      const fb::CompileSpec* s = d->compile_specs()->Get(i);
      specs[i] = CompileSpec{s->key()->c_str(), Span<const uint8_t>(s->value()->data(), s->value()->size())};
    }
    const GraphView graph(d->payload_nested_root(), Span<const SegmentData>());
    ErrorContext ctx;
    BackendLoadContext load;
    load.runtime = &runtime;
    load.error = &ctx;
    load.backend_id = "cuda";
    load.method_name = "step";
    const Result<MemoryRequirements> planned = cuda->plan_memory(load, graph, Span<const CompileSpec>(specs, 2));
    if (tokens == "1,4,16") {
      ASSERT_TRUE(planned.is_ok()) << ctx.message;
      EXPECT_GT(planned.value().device_bytes, 0u);
      backends::cuda::Buckets b;
      ASSERT_TRUE(backends::cuda::plan_buckets(graph, Span<const CompileSpec>(specs, 2), &b, &ctx).is_ok());
      EXPECT_EQ(PairsOf(b), (Pairs{{1, 1}, {4, 1}, {4, 2}, {4, 8}, {16, 1}, {16, 2}, {16, 8}, {64, 1}, {64, 2}, {64, 8}}));
      continue;
    }
    const char* expected = "cuda: compile spec buckets.tokens = '1,65': 65 is above the graph's max T (64)";
    ASSERT_FALSE(planned.is_ok());
    EXPECT_EQ(planned.status().code(), Error::InvalidArgument);
    EXPECT_STREQ(ctx.message, expected);
    ErrorContext init_ctx;
    BackendInitContext init;
    init.runtime = &runtime;
    init.error = &init_ctx;
    init.backend_id = "cuda";
    init.method_name = "step";
    const Result<DelegateHandle*> handle = cuda->init(init, graph, Span<const CompileSpec>(specs, 2));
    ASSERT_FALSE(handle.is_ok());
    EXPECT_EQ(handle.status().code(), Error::InvalidArgument);
    EXPECT_STREQ(init_ctx.message, expected);
  }
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
  ASSERT_TRUE(backends::cuda::plan(graph, Span<const CompileSpec>(), &l, &ctx).is_ok()) << ctx.message;
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
    ASSERT_TRUE(backends::cuda::plan(graph, Span<const CompileSpec>(), &l, &ctx).is_ok()) << ctx.message;
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
