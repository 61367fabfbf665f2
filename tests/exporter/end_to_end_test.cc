// Exported programs run by the runtime (Program::load -> load_method -> execute) against the IR
// evaluator on the reference kernels (the oracle). A separate binary from ember_exporter_test, so
// the exporter's own tests build even while the executor is being changed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backends/null/register.h"
#include "exporter/importers/builder/examples.h"
#include "exporter/passes/evaluate.h"
#include "exporter/pipeline.h"
#include "exporter/plan/overlap_check.h"
#include "kernels/builtin.h"
#include "runtime/backend/backend.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/executor/load_options.h"
#include "runtime/executor/memory_plan.h"
#include "runtime/core/data_loader.h"
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"
#include "runtime/kernel/kernel_registry.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer aligned_buffer(size_t size, size_t alignment = 65536) {
  const size_t rounded = (size + alignment - 1) / alignment * alignment;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded));
  std::memset(p, 0, rounded == 0 ? alignment : rounded);
  return Buffer(p);
}

// Runs `file` in the runtime on `inputs` (f32) and returns the outputs.
std::vector<HostTensor> run_in_runtime(const std::vector<uint8_t>& file, const std::vector<HostTensor>& inputs,
                                       const std::vector<const char*>& backend_list) {
  auto kernels = std::make_unique<KernelRegistry>();
  EXPECT_TRUE(register_builtin(*kernels).is_ok());
  auto backends = std::make_unique<BackendRegistry>();
  EXPECT_TRUE(backends::null_backend::register_backend(*backends).is_ok());
  RuntimeContext runtime;
  runtime.kernels = kernels.get();
  runtime.backends = backends.get();
  Buffer bytes = aligned_buffer(file.size());
  std::memcpy(bytes.get(), file.data(), file.size());
  BufferDataLoader loader(bytes.get(), file.size());
  LoadOptions options;
  options.backends = Span<const char* const>(backend_list.data(), backend_list.size());
  options.fallback = Fallback::Fail;  // the delegate must really run on its backend
  ErrorContext ctx;
  Result<Program> program = Program::load(loader, runtime, options, &ctx);
  if (!program.is_ok()) {
    ADD_FAILURE() << "Program::load: " << ctx.message;
    return {};
  }
  Result<MethodMeta> meta = program->method_meta("forward", &ctx);
  EXPECT_TRUE(meta.is_ok()) << ctx.message;
  Buffer method_mem = aligned_buffer(meta->method_allocator_bytes() + 64, 64);
  BumpAllocator allocator(Span<uint8_t>(method_mem.get(), meta->method_allocator_bytes() + 64));
  std::vector<Buffer> arena_mem;
  std::vector<Span<uint8_t>> arenas;
  for (size_t a = 0; a < meta->arena_count(); ++a) {
    const ArenaMeta arena = meta->arena(a).value();
    arena_mem.push_back(aligned_buffer(arena.size + 64, 64));
    arenas.emplace_back(arena_mem.back().get(), arena.size);
  }
  Buffer scratch = aligned_buffer(meta->scratch_bytes() + 64, 64);
  ember::MemoryPlan memory(allocator, Span<Span<uint8_t>>(arenas.data(), arenas.size()),
                    Span<uint8_t>(scratch.get(), meta->scratch_bytes()));
  Result<Method> method = program->load_method("forward", memory, &ctx);
  if (!method.is_ok()) {
    ADD_FAILURE() << "load_method: " << ctx.message;
    return {};
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorView v;
    v.data = const_cast<uint8_t*>(inputs[i].bytes.data());
    v.dtype = inputs[i].dtype;
    v.rank = static_cast<uint8_t>(inputs[i].dims.size());
    std::copy(inputs[i].dims.begin(), inputs[i].dims.end(), v.dims);
    EXPECT_TRUE(method->set_input(i, v, &ctx).is_ok()) << ctx.message;
  }
  EXPECT_TRUE(method->execute(&ctx).is_ok()) << ctx.message;
  std::vector<HostTensor> outputs;
  for (size_t o = 0; o < method->output_count(); ++o) {
    const TensorView* t = method->output(o);
    HostTensor h;
    h.dtype = t->dtype;
    h.dims.assign(t->dims, t->dims + t->rank);
    h.bytes.assign(static_cast<const uint8_t*>(t->data), static_cast<const uint8_t*>(t->data) + t->nbytes());
    outputs.push_back(std::move(h));
  }
  return outputs;
}

void expect_close(const HostTensor& actual, const HostTensor& expected) {
  ASSERT_EQ(actual.dims, expected.dims);
  const std::vector<float> a = actual.to_f32(), e = expected.to_f32();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], e[i], 1e-5f + 1e-4f * std::fabs(e[i])) << "element " << i;
  }
}

std::vector<float> pattern(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
  return v;
}

TEST(EndToEndTest, MlpMatchesOracleAtSeveralBatchSizes) {
  ExportOptions options;
  options.manifest = &testing::test_manifest();
  const ExportResult r = export_graph(build_mlp_example(1), options);
  EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
  for (int64_t batch : {1, 3, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<HostTensor> in{HostTensor::from_f32({batch, 64}, pattern(static_cast<size_t>(batch) * 64))};
    const auto expected = evaluate(r.graph, in);
    const auto actual = run_in_runtime(r.program.bytes, in, {"null"});
    ASSERT_EQ(actual.size(), 1u);
    expect_close(actual[0], expected[0]);
  }
}

TEST(EndToEndTest, CnnWithNullDelegateMatchesOracle) {
  for (const std::vector<std::string>& backends : {std::vector<std::string>{"portable"},
                                                  std::vector<std::string>{"null", "portable"}}) {
    ExportOptions options;
    options.manifest = &testing::test_manifest();
    options.backends = backends;
    const ExportResult r = export_graph(build_cnn_example(1), options);
    EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
    EXPECT_EQ(r.partition.delegates.size(), backends.size() == 2 ? 1u : 0u);
    const std::vector<HostTensor> in{HostTensor::from_f32({1, 3, 32, 32}, pattern(3 * 32 * 32))};
    const auto expected = evaluate(r.graph, in);
    const auto actual = run_in_runtime(r.program.bytes, in, {"null"});
    ASSERT_EQ(actual.size(), 1u);
    expect_close(actual[0], expected[0]);
  }
}

// Random graphs: a planning mistake (two live values sharing bytes) would corrupt the results.
TEST(EndToEndTest, RandomGraphsMatchOracle) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    for (bool delegate : {false, true}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (delegate ? " delegated" : ""));
      ExportOptions options;
      options.manifest = &testing::test_manifest();
      options.fold_constants = false;
      if (delegate) options.backends = {"null", "portable"};
      const ExportResult r = export_graph(testing::random_graph(seed, seed % 2 == 0), options);
      EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
      const int64_t rows = seed % 2 == 0 ? 1 + static_cast<int64_t>(seed % 6) : 3;
      std::vector<HostTensor> in;
      for (const NamedValue& nv : r.graph.inputs) {
        const Value& v = r.graph.values[static_cast<size_t>(nv.value)];
        std::vector<int64_t> dims;
        for (const Dim& d : v.dims) dims.push_back(d.sym != 0 ? rows : d.max);
        in.push_back(HostTensor::from_f32(dims, pattern(static_cast<size_t>(dims[0] * dims[1]))));
      }
      const auto expected = evaluate(r.graph, in);
      const auto actual = run_in_runtime(r.program.bytes, in, {"null"});
      ASSERT_EQ(actual.size(), expected.size());
      for (size_t o = 0; o < actual.size(); ++o) expect_close(actual[o], expected[o]);
    }
  }
}

}  // namespace
}  // namespace ember::exporter
