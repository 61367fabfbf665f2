// The fused W8A8 quantization plan (backends/cuda/plan.h FusedGroup), host-side, no GPU (CI): in a
// Qwen3 step exported with --quantize fp8-dynamic, every W8A8 linear fed by an rms_norm or silu_mul
// reads that producer's group, found independently here from the instructions; each group's
// buffer is placed in the value arena without overlapping any value or buffer alive at the same
// time; weight-only FP8 gives no groups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/plan.h"
#include "exporter/importers/hf_llm/step_graph.h"
#include "exporter/passes/quantize.h"
#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"

namespace ember {
namespace {

namespace cuda = backends::cuda;

std::vector<uint8_t> ExportQuantizedStep(exporter::QuantPreset preset) {
  exporter::hf::StepOptions options;
  options.max_seqs = 4;
  options.max_tokens = 32;
  options.max_context = 64;
  options.block_size = 16;
  const char* env = std::getenv("EMBER_LLM_CHECKPOINTS");
  const std::string dir = std::string(env != nullptr ? env : EMBER_LLM_CHECKPOINTS) + "/qwen3_f32";
  exporter::QuantizeOptions q;
  q.preset = preset;
  q.min_size = 0;
  return testing::export_program(exporter::hf::import_step(dir, options).graph, {"portable"}, q).program.bytes;
}

uint64_t Align256(uint64_t n) { return (n + 255) / 256 * 256; }

TEST(CudaFusionPlan, W8a8LinearsReadTheirProducersQuantizedRows) {
  const std::vector<uint8_t> bytes = ExportQuantizedStep(exporter::QuantPreset::Fp8Dynamic);
  const fb::Graph* g = testing::program_of(bytes)->methods()->Get(0)->graph();
  const GraphView graph(g, Span<const SegmentData>());
  const uint32_t instructions = graph.instruction_count();

  // Independently: producer instruction -> (its output, the last W8A8 linear reading it).
  std::map<uint32_t, uint32_t> writer;  // value -> instruction
  for (uint32_t i = 0; i < instructions; ++i) {
    const fb::KernelCall* call = g->instructions()->Get(i)->args_as_KernelCall();
    ASSERT_NE(call, nullptr);
    for (uint32_t v : *call->outputs()) writer[v] = i;
  }
  std::map<uint32_t, uint32_t> expected_last;  // producer -> last consumer
  int w8a8 = 0;
  for (uint32_t i = 0; i < instructions; ++i) {
    const fb::KernelCall* call = g->instructions()->Get(i)->args_as_KernelCall();
    if (call->op() != fb::OpCode::Linear) continue;
    if (call->attrs_as_LinearAttrs()->activation_quant() != fb::ActivationQuant::Fp8PerToken) continue;
    ++w8a8;
    const uint32_t p = writer.at(static_cast<uint32_t>(call->inputs()->Get(0)));
    const fb::OpCode op = g->instructions()->Get(p)->args_as_KernelCall()->op();
    if (op == fb::OpCode::RmsNorm || op == fb::OpCode::SiluMul) expected_last[p] = std::max(expected_last[p], i);
  }
  ASSERT_GT(w8a8, 0) << "the export quantized no linear with W8A8";

  std::vector<cuda::FusedGroup> groups(cuda::kMaxFused);
  const uint32_t count = cuda::plan_fused(graph, groups.data());
  ASSERT_EQ(count, expected_last.size());
  EXPECT_GE(count, 3u) << "per layer: the attention norm, the MLP norm and silu_mul";
  for (uint32_t k = 0; k < count; ++k) {
    const cuda::FusedGroup& grp = groups[k];
    ASSERT_TRUE(expected_last.count(grp.producer)) << "instruction " << grp.producer << " is not a producer";
    EXPECT_EQ(grp.last_use, expected_last[grp.producer]);
    const fb::Tensor& t = graph.value(grp.value);
    EXPECT_EQ(grp.k, t.dims()->Get(t.dims()->size() - 1)->max());
    EXPECT_EQ(grp.rows * grp.k * 4, static_cast<int64_t>(t.nbytes()));
    // Scales, then the larger of 8 f32 rows and every row's codes.
    EXPECT_EQ(grp.scales_bytes, Align256(static_cast<uint64_t>(grp.rows) * 4));
    EXPECT_EQ(grp.bytes, grp.scales_bytes + Align256(static_cast<uint64_t>(std::max(std::min<int64_t>(grp.rows, 8) * grp.k * 4,
                                                                                        grp.rows * grp.k))));
    for (uint32_t i = 0; i < instructions; ++i) {
      const fb::KernelCall* call = g->instructions()->Get(i)->args_as_KernelCall();
      const bool w8a8_reader = call->op() == fb::OpCode::Linear &&
                               call->attrs_as_LinearAttrs()->activation_quant() == fb::ActivationQuant::Fp8PerToken &&
                               call->inputs()->Get(0) == static_cast<int32_t>(grp.value);
      EXPECT_EQ(cuda::reads_fused(graph, i, grp), w8a8_reader) << "instruction " << i;
    }
  }

  // Placement: buffers overlap no value alive in [producer, last_use] and no other live buffer.
  const uint32_t n = graph.value_count();
  std::vector<uint64_t> offsets(n, UINT64_MAX), group_offsets(count, UINT64_MAX);
  const uint64_t arena = cuda::plan_values(graph, offsets.data(), groups.data(), count, group_offsets.data());
  std::vector<uint32_t> first(n, UINT32_MAX), last(n, 0);
  for (uint32_t i = 0; i < instructions; ++i) {
    const fb::KernelCall* call = g->instructions()->Get(i)->args_as_KernelCall();
    auto touch = [&](int64_t v) {
      if (v < 0) return;
      first[size_t(v)] = std::min(first[size_t(v)], i);
      last[size_t(v)] = std::max(last[size_t(v)], i);
    };
    for (int32_t v : *call->inputs()) touch(v);
    for (uint32_t v : *call->outputs()) touch(v);
  }
  auto disjoint = [](uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a + an <= b || b + bn <= a; };
  int checked = 0;
  for (uint32_t k = 0; k < count; ++k) {
    const cuda::FusedGroup& grp = groups[k];
    ASSERT_NE(group_offsets[k], UINT64_MAX);
    EXPECT_EQ(group_offsets[k] % 256, 0u);
    EXPECT_LE(group_offsets[k] + grp.bytes, arena);
    for (uint32_t v = 0; v < n; ++v) {
      if (offsets[v] == UINT64_MAX || graph.is_io(v) || graph.value(v).storage_type() != fb::Storage::PlannedStorage) continue;
      if (last[v] < grp.producer || grp.last_use < first[v]) continue;
      ++checked;
      EXPECT_TRUE(disjoint(group_offsets[k], grp.bytes, offsets[v], Align256(graph.value(v).nbytes())))
          << "group " << k << " and value " << v;
    }
    for (uint32_t j = k + 1; j < count; ++j) {
      if (groups[j].last_use < grp.producer || grp.last_use < groups[j].producer) continue;
      EXPECT_TRUE(disjoint(group_offsets[k], grp.bytes, group_offsets[j], groups[j].bytes)) << k << " " << j;
    }
  }
  EXPECT_GT(checked, 0);
  // The layout counts the buffers in the value arena.
  cuda::Layout layout;
  ASSERT_TRUE(cuda::plan(graph, Span<const CompileSpec>(), &layout, nullptr).is_ok());
  EXPECT_EQ(layout.fused_count, count);
  EXPECT_EQ(layout.value_bytes, arena);
}

TEST(CudaFusionPlan, WeightOnlyFp8HasNoGroups) {
  const std::vector<uint8_t> bytes = ExportQuantizedStep(exporter::QuantPreset::Fp8);
  const GraphView graph(testing::program_of(bytes)->methods()->Get(0)->graph(), Span<const SegmentData>());
  std::vector<cuda::FusedGroup> groups(cuda::kMaxFused);
  EXPECT_EQ(cuda::plan_fused(graph, groups.data()), 0u);
}

}  // namespace
}  // namespace ember
