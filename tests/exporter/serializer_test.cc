#include "exporter/serialize/serializer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "exporter/pipeline.h"
#include "exporter/plan/overlap_check.h"
#include "runtime/core/hash.h"
#include "runtime/program/program_file.h"
#include "schema/program_generated.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

struct Parsed {
  FileHeader header;
  const fb::Program* program = nullptr;
};

Parsed parse(const std::vector<uint8_t>& file) {
  Parsed p;
  ErrorContext ctx;
  EXPECT_TRUE(decode_header(file.data(), file.size(), file.size(), true, &p.header, &ctx).is_ok()) << ctx.message;
  const uint8_t* fb_bytes = file.data() + p.header.flatbuffer_offset;
  flatbuffers::Verifier verifier(fb_bytes, p.header.flatbuffer_size);
  EXPECT_TRUE(fb::VerifyProgramBuffer(verifier));
  p.program = fb::GetProgram(fb_bytes);
  return p;
}

ExportResult export_example(const std::string& name, const std::vector<std::string>& backends, bool strip = false) {
  ExportOptions options;
  options.backends = backends;
  options.manifest = &testing::test_manifest();
  options.strip_debug = strip;
  return export_graph(build_example(name, 1), options);
}

TEST(SerializerTest, MlpRoundTrip) {
  const ExportResult r = export_example("mlp", {"portable"});
  const std::vector<uint8_t>& file = r.program.bytes;
  const Parsed p = parse(file);
  const FileHeader& h = p.header;
  EXPECT_EQ(h.flatbuffer_offset, 64u);
  EXPECT_EQ(h.flatbuffer_crc32c, crc32c(file.data() + 64, h.flatbuffer_size));
  EXPECT_EQ(std::memcmp(file.data() + 64 + 4, "EM01", 4), 0);  // file_identifier
  EXPECT_EQ(h.segment_base % kConstantSegmentAlignment, 0u);
  EXPECT_EQ(h.segment_base + h.segment_size, file.size());
  EXPECT_EQ(h.required_features, 0u);
  EXPECT_EQ(testing::validate_with_runtime(file), "");
  EXPECT_TRUE(check_overlaps(file).empty());

  const fb::Program& prog = *p.program;
  EXPECT_EQ(prog.producer()->str(), "ember-exporter 0.1.0");
  EXPECT_EQ(prog.required_features(), h.required_features);
  ASSERT_EQ(prog.methods()->size(), 1u);
  const fb::Method& m = *prog.methods()->Get(0);
  EXPECT_EQ(m.name()->str(), "forward");
  EXPECT_EQ(m.scratch_bytes(), 0u);
  ASSERT_EQ(m.arenas()->size(), 2u);
  EXPECT_EQ(m.arenas()->Get(0)->kind(), fb::ArenaKind::Activation);
  EXPECT_EQ(m.arenas()->Get(0)->size(), r.plan.activation_size);
  EXPECT_EQ(m.arenas()->Get(1)->kind(), fb::ArenaKind::IO);
  EXPECT_EQ(m.arenas()->Get(1)->size(), r.plan.io_size);
  const fb::Graph& g = *m.graph();

  // Symbols and IO.
  ASSERT_EQ(g.symbols()->size(), 1u);
  EXPECT_EQ(g.symbols()->Get(0)->name()->str(), "batch");
  EXPECT_EQ(g.symbols()->Get(0)->min(), 1);
  EXPECT_EQ(g.symbols()->Get(0)->max(), 8);
  ASSERT_EQ(g.inputs()->size(), 1u);
  EXPECT_EQ(g.inputs()->Get(0)->name()->str(), "x");
  const fb::Tensor& x = *g.values()->Get(g.inputs()->Get(0)->value());
  EXPECT_EQ(x.dtype(), fb::ScalarType::F32);
  ASSERT_EQ(x.dims()->size(), 2u);
  EXPECT_EQ(x.dims()->Get(0)->max(), 8);
  EXPECT_EQ(x.dims()->Get(0)->sym(), 1);
  EXPECT_EQ(x.dims()->Get(1)->max(), 64);
  EXPECT_EQ(x.dims()->Get(1)->sym(), 0);
  EXPECT_EQ(x.nbytes(), 8u * 64 * 4);
  EXPECT_EQ(x.dim_order(), fb::DimOrder::Contiguous);
  ASSERT_NE(x.storage_as_PlannedStorage(), nullptr);
  EXPECT_EQ(x.storage_as_PlannedStorage()->arena(), 1u);
  ASSERT_EQ(g.outputs()->size(), 1u);
  EXPECT_EQ(g.outputs()->Get(0)->name()->str(), "probs");
  EXPECT_EQ(g.lifetimes()->size(), g.values()->size());

  // Instructions as built, attributes as the op's table, constants byte-exact.
  const fb::Segment& constants = *prog.segments()->Get(0);
  EXPECT_EQ(constants.kind(), fb::SegmentKind::Constants);
  EXPECT_EQ(constants.alignment(), kConstantSegmentAlignment);
  const uint8_t* seg = file.data() + h.segment_base + constants.offset();
  EXPECT_EQ(constants.xxh64(), xxh64(seg, constants.size()));
  ASSERT_EQ(g.instructions()->size(), r.graph.nodes.size());
  for (uint32_t i = 0; i < g.instructions()->size(); ++i) {
    const fb::Instruction& instr = *g.instructions()->Get(i);
    const Node& node = r.graph.nodes[i];
    const fb::KernelCall* call = instr.args_as_KernelCall();
    ASSERT_NE(call, nullptr);
    EXPECT_EQ(static_cast<OpCode>(call->op()), node.op);
    EXPECT_EQ(instr.debug_id(), i + 1);
    ASSERT_EQ(call->inputs()->size(), node.inputs.size());
    switch (node.op) {
      case OpCode::Linear:
        ASSERT_NE(call->attrs_as_LinearAttrs(), nullptr);
        EXPECT_EQ(call->attrs_as_LinearAttrs()->activation_quant(), fb::ActivationQuant::None);
        break;
      case OpCode::Gelu:
        ASSERT_NE(call->attrs_as_GeluAttrs(), nullptr);
        EXPECT_EQ(call->attrs_as_GeluAttrs()->approximate(), fb::GeluApprox::None);
        break;
      case OpCode::Softmax:
        ASSERT_NE(call->attrs_as_AxisAttrs(), nullptr);
        EXPECT_EQ(call->attrs_as_AxisAttrs()->axis(), -1);
        break;
      case OpCode::Relu: EXPECT_EQ(call->attrs_type(), fb::Attributes::NONE); break;
      default: ADD_FAILURE() << "unexpected op";
    }
    for (uint32_t k = 0; k < call->inputs()->size(); ++k) {
      const int id = node.inputs[k];
      const fb::Tensor& t = *g.values()->Get(static_cast<uint32_t>(call->inputs()->Get(k)));
      EXPECT_EQ(t.nbytes(), nbytes_max(r.graph.values[static_cast<size_t>(id)]));
      if (const auto* cs = t.storage_as_ConstantStorage()) {
        EXPECT_EQ(cs->offset() % 64, 0u);
        const auto& bytes = *r.graph.values[static_cast<size_t>(id)].data;
        EXPECT_EQ(std::memcmp(seg + cs->offset(), bytes.data(), bytes.size()), 0) << node.name << " input " << k;
      }
    }
  }

  // Debug segment: last, its own DebugInfo FlatBuffer.
  const fb::Segment& debug = *prog.segments()->Get(prog.segments()->size() - 1);
  ASSERT_EQ(debug.kind(), fb::SegmentKind::Debug);
  const uint8_t* dbg = file.data() + h.segment_base + debug.offset();
  EXPECT_EQ(debug.xxh64(), xxh64(dbg, debug.size()));
  flatbuffers::Verifier dv(dbg, debug.size());
  ASSERT_TRUE(dv.VerifyBuffer<fb::DebugInfo>(nullptr));
  const fb::DebugInfo* info = flatbuffers::GetRoot<fb::DebugInfo>(dbg);
  ASSERT_EQ(info->nodes()->size(), r.graph.nodes.size());
  EXPECT_EQ(info->nodes()->Get(0)->name()->str(), "fc1");
  EXPECT_EQ(info->nodes()->Get(0)->source_op()->str(), "linear");
}

// Two constants sharing their bytes (a tied LM head) are stored once, at one offset; equal bytes in
// separate buffers are not merged.
TEST(SerializerTest, ConstantsSharingBytesAreStoredOnce) {
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {2, 16});
  const ValueId w = b.random_uniform("w", {16, 16}, -1.0f, 1.0f);
  const ConstantBytes bytes = b.graph().values[static_cast<size_t>(w)].data;
  const ValueId tied = b.constant_shared("w_tied", ScalarType::F32, {16, 16}, bytes);
  const ValueId copy = b.constant("w_copy", ScalarType::F32, {16, 16}, *bytes);
  b.output("y", b.add(b.add(b.linear(x, w), b.linear(x, tied)), b.linear(x, copy)));
  ExportOptions options;
  options.manifest = &testing::test_manifest();
  options.fold_constants = false;
  const ExportResult r = export_graph(b.build(), options);
  EXPECT_EQ(r.program.constant_bytes, 2u * 16 * 16 * 4);
  EXPECT_EQ(testing::validate_with_runtime(r.program.bytes), "");
  const fb::Graph& g = *parse(r.program.bytes).program->methods()->Get(0)->graph();
  std::vector<uint64_t> offsets;
  for (const fb::Tensor* t : *g.values()) {
    if (t->storage_type() == fb::Storage::ConstantStorage) offsets.push_back(t->storage_as_ConstantStorage()->offset());
  }
  ASSERT_EQ(offsets.size(), 3u);
  std::sort(offsets.begin(), offsets.end());
  // w and w_tied at one offset, w_copy at another.
  EXPECT_EQ(std::unique(offsets.begin(), offsets.end()) - offsets.begin(), 2);
}

TEST(SerializerTest, StripDebugDropsTheSegmentAndIds) {
  const ExportResult full = export_example("mlp", {"portable"});
  const ExportResult stripped = export_example("mlp", {"portable"}, /*strip=*/true);
  EXPECT_LT(stripped.program.bytes.size(), full.program.bytes.size());
  const Parsed p = parse(stripped.program.bytes);
  for (const fb::Segment* s : *p.program->segments()) EXPECT_NE(s->kind(), fb::SegmentKind::Debug);
  for (const fb::Instruction* i : *p.program->methods()->Get(0)->graph()->instructions()) EXPECT_EQ(i->debug_id(), 0u);
  EXPECT_EQ(testing::validate_with_runtime(stripped.program.bytes), "");
}

TEST(SerializerTest, CnnAttributesAndDelegatePayload) {
  const ExportResult r = export_example("cnn", {"null", "portable"});
  const std::vector<uint8_t>& file = r.program.bytes;
  EXPECT_EQ(testing::validate_with_runtime(file), "");
  EXPECT_TRUE(check_overlaps(file).empty());
  const Parsed p = parse(file);
  const fb::Method& m = *p.program->methods()->Get(0);
  ASSERT_EQ(m.delegates()->size(), 1u);
  const fb::Delegate& d = *m.delegates()->Get(0);
  EXPECT_EQ(d.backend_id()->str(), "null");
  EXPECT_EQ(d.format(), fb::DelegateFormat::Graph);
  EXPECT_EQ(d.format_version(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d.payload()->data()) % 64, reinterpret_cast<uintptr_t>(file.data()) % 64);
  const fb::Graph& sub = *d.payload_nested_root();
  ASSERT_EQ(sub.inputs()->size(), 1u);
  ASSERT_EQ(sub.outputs()->size(), 1u);
  EXPECT_EQ(sub.values()->Get(sub.inputs()->Get(0)->value())->storage_type(), fb::Storage::NONE);
  EXPECT_EQ(sub.values()->Get(sub.outputs()->Get(0)->value())->storage_type(), fb::Storage::NONE);
  int planned = 0, constant = 0;
  for (const fb::Tensor* t : *sub.values()) {
    planned += t->storage_as_PlannedStorage() ? 1 : 0;
    constant += t->storage_as_ConstantStorage() ? 1 : 0;
  }
  // relu1 and relu2 are fused into conv1 and pw2 (passes/conv_clamp_fusion.h).
  EXPECT_EQ(planned, 4);   // conv1, pool1, dw2, pw2 outputs
  EXPECT_EQ(constant, 6);  // three convs' weights and biases
  ASSERT_EQ(sub.instructions()->size(), 5u);
  const fb::KernelCall* conv1 = sub.instructions()->Get(0)->args_as_KernelCall();
  ASSERT_NE(conv1, nullptr);
  ASSERT_NE(conv1->attrs_as_Conv2dAttrs(), nullptr);
  EXPECT_EQ(conv1->attrs_as_Conv2dAttrs()->out_min(), 0.0f);
  EXPECT_EQ(conv1->attrs_as_Conv2dAttrs()->out_max(), std::numeric_limits<float>::infinity());
  const fb::KernelCall* dw = sub.instructions()->Get(2)->args_as_KernelCall();
  ASSERT_NE(dw, nullptr);
  ASSERT_NE(dw->attrs_as_Conv2dAttrs(), nullptr);
  EXPECT_EQ(dw->attrs_as_Conv2dAttrs()->groups(), 16);
  EXPECT_EQ(dw->attrs_as_Conv2dAttrs()->padding()->size(), 4u);
  EXPECT_EQ(dw->attrs_as_Conv2dAttrs()->padding()->Get(0), 1);
  EXPECT_EQ(dw->attrs_as_Conv2dAttrs()->out_min(), -std::numeric_limits<float>::infinity());
  const fb::KernelCall* pool = sub.instructions()->Get(1)->args_as_KernelCall();
  ASSERT_NE(pool->attrs_as_Pool2dAttrs(), nullptr);
  EXPECT_EQ(pool->attrs_as_Pool2dAttrs()->kernel()->Get(0), 2);
  EXPECT_EQ(pool->attrs_as_Pool2dAttrs()->stride()->Get(1), 2);
  // Method: delegate call, then reshape, linear, softmax.
  const fb::Graph& g = *m.graph();
  ASSERT_EQ(g.instructions()->size(), 4u);
  EXPECT_NE(g.instructions()->Get(0)->args_as_DelegateCall(), nullptr);
  const fb::KernelCall* reshape = g.instructions()->Get(1)->args_as_KernelCall();
  ASSERT_NE(reshape, nullptr);
  ASSERT_NE(reshape->attrs_as_ReshapeAttrs(), nullptr);
  EXPECT_EQ(reshape->attrs_as_ReshapeAttrs()->dims()->size(), 2u);
  EXPECT_EQ(reshape->attrs_as_ReshapeAttrs()->dims()->Get(1)->max(), 32);
  // Every constant stored once: 8 tensors, none duplicated for the delegate.
  EXPECT_EQ(r.program.constant_count, 8u);
  uint64_t expected = 0;
  for (const Value& v : r.graph.values) expected += v.is_constant() ? v.data->size() : 0;
  EXPECT_EQ(r.program.constant_bytes, expected);
}

TEST(SerializerTest, AllOpAttributeTablesValidate) {
  GraphBuilder b;
  b.symbol("n", 1, 4);
  ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("n"), 4, 6, 6});
  ValueId h = b.avg_pool2d(x, Pool2dParams::square(2, 2));
  ValueId r = b.reshape(h, {DimSpec::sym("n"), -1});
  ValueId t = b.transpose(r, {1, 0});
  ValueId s = b.slice(t, {0}, {0}, {8}, {2});
  ValueId c = b.transpose(b.concat({s, s}, 0), {1, 0});  // [n, 8]
  ValueId gamma = b.random_uniform("gamma", {8}, 0, 1);
  ValueId beta = b.random_uniform("beta", {8}, 0, 1);
  ValueId ln = b.layer_norm(c, gamma, beta, -1, 1e-5f);
  b.output("y", b.tanh(ln));
  Graph g = b.build();
  const Partition p = portable_partition(g);
  const MemoryPlan plan = plan_memory(g, p);
  const SerializedProgram prog = serialize_program(g, p, plan);
  EXPECT_EQ(testing::validate_with_runtime(prog.bytes), "");
  EXPECT_TRUE(check_overlaps(prog.bytes).empty());
}

}  // namespace
}  // namespace ember::exporter
