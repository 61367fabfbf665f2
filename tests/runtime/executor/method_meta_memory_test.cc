// Memory by purpose through the executor (runtime/backend/README.md, "Sizing before load"): what a
// backend lists in plan_memory() reaches MethodMeta::delegate(i).memory unchanged, backend_memory()
// merges it across delegates by purpose, and the plan == taken check catches a breakdown that moved
// (same totals, bytes under another purpose) or a graph count that differs.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/program_util.h"

namespace ember {
namespace {

// Reports, per delegate, bytes that depend on its graph (weights: 1000 per instruction), so three
// delegates have three different breakdowns. init() takes nothing; the handle is a slot recording
// the instruction count, which memory_requirements() reports from.
class PartsBackend final : public Backend {
 public:
  enum class Report { AsPlanned, MovedBytes, FewerGraphs };
  explicit PartsBackend(Report report) : report_(report) {}

  static MemoryRequirements Planned(uint32_t instructions) {
    MemoryRequirements m;
    m.add_part("handle", MemoryDomain::Host, 64);
    m.add_part("weights", MemoryDomain::Device, 1000ull * instructions);
    m.add_part("values", MemoryDomain::Device, 24);
    m.add_part("io staging", MemoryDomain::PinnedHost, 16);
    m.graph_count = 2;
    return m;
  }

  bool is_available(const RuntimeContext&) const override { return true; }
  bool supports(const RuntimeContext&, const KernelKey&) const override { return true; }
  Result<MemoryRequirements> plan_memory(BackendLoadContext&, const GraphView& graph,
                                         Span<const CompileSpec>) const override {
    return Planned(graph.instruction_count());
  }
  Result<DelegateHandle*> init(BackendInitContext& ctx, const GraphView& graph,
                               Span<const CompileSpec>) const override {
    uint32_t& slot = slots_[ctx.delegate_index % kSlots];
    slot = graph.instruction_count();
    return reinterpret_cast<DelegateHandle*>(&slot);
  }
  Status execute(BackendExecuteContext&, DelegateHandle*, Span<const TensorView>, Span<TensorView>) const override {
    return Status::ok();
  }
  MemoryRequirements memory_requirements(const DelegateHandle* handle) const override {
    const uint32_t instructions = *reinterpret_cast<const uint32_t*>(handle);
    if (report_ == Report::AsPlanned) return Planned(instructions);
    MemoryRequirements m;
    m.add_part("handle", MemoryDomain::Host, 64);
    if (report_ == Report::MovedBytes) {  // the same device total, 8 bytes listed under another purpose
      m.add_part("weights", MemoryDomain::Device, 1000ull * instructions - 8);
      m.add_part("values", MemoryDomain::Device, 32);
    } else {
      m.add_part("weights", MemoryDomain::Device, 1000ull * instructions);
      m.add_part("values", MemoryDomain::Device, 24);
    }
    m.add_part("io staging", MemoryDomain::PinnedHost, 16);
    m.graph_count = report_ == Report::FewerGraphs ? 1 : 2;
    return m;
  }
  void destroy(DelegateHandle*) const noexcept override {}

 private:
  static constexpr uint32_t kSlots = 8;
  Report report_;
  mutable uint32_t slots_[kSlots] = {};
};

struct Loaded {
  explicit Loaded(const PartsBackend& backend) : rt(testing::RuntimeOptions{.null_backend = false}) {
    EXPECT_TRUE(registry.add("sim", backend).is_ok());
    context = rt.context;
    context.backends = &registry;
    // cnn_sim: three GRAPH delegates exported for sim (conv1 | dw2 pw2 | fc), which the fake takes
    // at its word.
    lm = std::make_unique<testing::LoadedMethod>(testing::example("cnn_sim").program.bytes, context);
  }
  testing::Runtime rt;
  BackendRegistry registry;
  RuntimeContext context;
  std::unique_ptr<testing::LoadedMethod> lm;
};

const MemoryPart* Find(const MemoryRequirements& m, const char* purpose, MemoryDomain domain) {
  for (const MemoryPart& p : m.parts()) {
    if (p.domain == domain && std::strcmp(p.purpose, purpose) == 0) return &p;
  }
  return nullptr;
}

TEST(MethodMetaMemoryTest, DelegatePartsReachMethodMetaAndMergeByPurposeInTheSum) {
  const PartsBackend backend(PartsBackend::Report::AsPlanned);
  Loaded loaded(backend);
  ASSERT_TRUE(loaded.lm->ok()) << loaded.lm->ctx().message;
  const MethodMeta meta = loaded.lm->method().meta();
  ASSERT_EQ(meta.delegate_count(), 3u);
  uint64_t instructions = 0;
  for (uint32_t d = 0; d < meta.delegate_count(); ++d) {
    SCOPED_TRACE("delegate " + std::to_string(d));
    ErrorContext ctx;
    Result<DelegateMeta> del = meta.delegate(d, &ctx);
    ASSERT_TRUE(del.is_ok()) << ctx.message;
    EXPECT_EQ(std::string(del->runs_on), "sim");
    const MemoryRequirements& m = del->memory;
    instructions += del->instruction_count;
    EXPECT_EQ(m.host_bytes, 64u);
    EXPECT_EQ(m.pinned_bytes, 16u);
    EXPECT_EQ(m.device_bytes, 1000u * del->instruction_count + 24);
    EXPECT_EQ(m.graph_count, 2u);
    ASSERT_EQ(m.parts().size(), 4u);
    EXPECT_STREQ(m.parts()[1].purpose, "weights");
    EXPECT_EQ(m.parts()[1].bytes, 1000u * del->instruction_count);
    EXPECT_TRUE(m == PartsBackend::Planned(del->instruction_count));
    // What init took, as the backend reports it, is what was planned, breakdown included.
    EXPECT_TRUE(loaded.lm->method().delegate_memory(d) == m);
  }
  ASSERT_GT(instructions, 3u);
  ErrorContext ctx;
  Result<MemoryRequirements> sum = meta.backend_memory(&ctx);
  ASSERT_TRUE(sum.is_ok()) << ctx.message;
  EXPECT_EQ(sum->host_bytes, 3 * 64u);
  EXPECT_EQ(sum->pinned_bytes, 3 * 16u);
  EXPECT_EQ(sum->device_bytes, 1000 * instructions + 3 * 24);
  EXPECT_EQ(sum->graph_count, 6u);
  EXPECT_EQ(sum->parts().size(), 4u);  // merged by purpose, not one per delegate
  const MemoryPart* weights = Find(*sum, "weights", MemoryDomain::Device);
  ASSERT_NE(weights, nullptr);
  EXPECT_EQ(weights->bytes, 1000 * instructions);
  const MemoryPart* staging = Find(*sum, "io staging", MemoryDomain::PinnedHost);
  ASSERT_NE(staging, nullptr);
  EXPECT_EQ(staging->bytes, 48u);
  EXPECT_EQ(Find(*sum, "io staging", MemoryDomain::Device), nullptr);
  for (MemoryDomain d : {MemoryDomain::Host, MemoryDomain::PinnedHost, MemoryDomain::Device}) {
    EXPECT_EQ(sum->unlisted(d), 0u) << to_string(d);
  }
  testing::ExpectPlannedMemoryIsTaken(*loaded.lm, "sim", 3);
}

TEST(MethodMetaMemoryTest, PlanEqualsTakenComparesTheBreakdownAndTheGraphCount) {
  for (PartsBackend::Report report : {PartsBackend::Report::MovedBytes, PartsBackend::Report::FewerGraphs}) {
    SCOPED_TRACE(report == PartsBackend::Report::MovedBytes ? "moved bytes" : "fewer graphs");
    const PartsBackend backend(report);
    Loaded loaded(backend);
    ASSERT_TRUE(loaded.lm->ok()) << loaded.lm->ctx().message;
    const MethodMeta meta = loaded.lm->method().meta();
    for (uint32_t d = 0; d < meta.delegate_count(); ++d) {
      const MemoryRequirements planned = meta.delegate(d)->memory;
      const MemoryRequirements taken = loaded.lm->method().delegate_memory(d);
      // The totals agree: only the breakdown or the graph count tells them apart.
      EXPECT_EQ(planned.host_bytes, taken.host_bytes);
      EXPECT_EQ(planned.pinned_bytes, taken.pinned_bytes);
      EXPECT_EQ(planned.device_bytes, taken.device_bytes);
      EXPECT_FALSE(planned == taken) << "delegate " << d;
      EXPECT_TRUE(planned != taken);
    }
  }
}

}  // namespace
}  // namespace ember
