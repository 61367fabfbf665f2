// GRAPH delegate payloads that device backends need: program state (the KV cache) claimed by the
// delegate and named by StateStorage inside the payload, and quantized weights whose scales travel
// inside the payload as references to the Method's constant bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "exporter/pipeline.h"
#include "exporter/plan/overlap_check.h"
#include "runtime/program/program_file.h"
#include "schema/program_generated.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

const fb::Program& parse_program(const std::vector<uint8_t>& file) {
  FileHeader header;
  ErrorContext ctx;
  EXPECT_TRUE(decode_header(file.data(), file.size(), file.size(), true, &header, &ctx).is_ok()) << ctx.message;
  flatbuffers::Verifier verifier(file.data() + header.flatbuffer_offset, header.flatbuffer_size);
  EXPECT_TRUE(fb::VerifyProgramBuffer(verifier));
  return *fb::GetProgram(file.data() + header.flatbuffer_offset);
}

const fb::Segment* constants_segment(const fb::Program& program) {
  if (program.segments() == nullptr) return nullptr;
  for (const fb::Segment* s : *program.segments()) {
    if (s->kind() == fb::SegmentKind::Constants) return s;
  }
  return nullptr;
}

// ---- State. ----------------------------------------------------------------------------------------

// The paged attention example (q, k, v, the two KV caches as program state kv.0.k / kv.0.v, the
// scheduling inputs) -> reshape -> logits_gather. "sim" takes paged_attention; with `whole`, the
// reshape and the gather too.
CapabilityManifest state_manifest(bool whole) {
  std::string sim = R"({"op": "paged_attention",
      "dtypes": ["f32","f32","f32","f32","f32","i32","i32","i32","i32","f32"]})";
  if (whole) {
    sim += R"(, {"op": "reshape", "dtypes": ["f32","f32"]},
              {"op": "logits_gather", "dtypes": ["f32","i32","f32"]})";
  }
  return CapabilityManifest::parse(R"({"format": 1, "kernels": [
      {"op": "reshape", "dtypes": ["f32","f32"], "library": "reference"},
      {"op": "logits_gather", "dtypes": ["f32","i32","f32"], "library": "reference"}],
    "backends": [{"id": "sim", "ops": [)" + sim + "]}]}",
                                   "state manifest");
}

ExportResult export_state_example(const CapabilityManifest& manifest) {
  ExportOptions options;
  options.backends = {"sim", "portable"};
  options.manifest = &manifest;
  return export_graph(build_paged_attention_example(ScalarType::F32), options);
}

TEST(DelegatePayloadTest, StateReadByADelegateIsItsStateNotAnInput) {
  for (bool whole : {true, false}) {
    SCOPED_TRACE(whole ? "whole graph delegated" : "paged_attention delegated");
    const Graph g = build_paged_attention_example(ScalarType::F32);
    const Partition p = partition_graph(g, state_manifest(whole), {"sim", "portable"});
    ASSERT_EQ(p.delegates.size(), 1u);
    const DelegateGraph& d = p.delegates[0];
    EXPECT_EQ(d.backend, "sim");
    std::vector<std::string> states;
    for (int v : d.states) states.push_back(g.values[static_cast<size_t>(v)].state);
    EXPECT_EQ(states, (std::vector<std::string>{"kv.0.k", "kv.0.v"}));
    for (int v : d.inputs) {
      EXPECT_FALSE(g.values[static_cast<size_t>(v)].is_state()) << g.values[static_cast<size_t>(v)].name;
      EXPECT_TRUE(g.is_input(v)) << g.values[static_cast<size_t>(v)].name;
    }
    for (int v : d.outputs) EXPECT_FALSE(g.values[static_cast<size_t>(v)].is_state());
    // q, k, v, slot_mapping, block_tables, context_lens, query_start (+ logits_indices when whole).
    EXPECT_EQ(d.inputs.size(), whole ? 8u : 7u);
    EXPECT_EQ(d.outputs.size(), 1u);
    EXPECT_TRUE(d.constants.empty());
  }
}

TEST(DelegatePayloadTest, PayloadNamesTheProgramStateAndTheCallPassesNone) {
  for (bool whole : {true, false}) {
    SCOPED_TRACE(whole ? "whole graph delegated" : "paged_attention delegated");
    const CapabilityManifest manifest = state_manifest(whole);
    const ExportResult r = export_state_example(manifest);
    EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
    const fb::Program& prog = parse_program(r.program.bytes);
    EXPECT_NE(prog.required_features() & kFeatureState, 0u);
    EXPECT_NE(prog.required_features() & kFeaturePagedKv, 0u);
    ASSERT_NE(prog.states(), nullptr);
    ASSERT_EQ(prog.states()->size(), 2u);
    ASSERT_NE(prog.symbols(), nullptr);
    const fb::Method& m = *prog.methods()->Get(0);
    const fb::Graph& mg = *m.graph();

    // The Method never touches the state: no value of it has StateStorage, no call passes one.
    for (const fb::Tensor* t : *mg.values()) EXPECT_NE(t->storage_type(), fb::Storage::StateStorage);
    int calls = 0;
    for (const fb::Instruction* instr : *mg.instructions()) {
      const fb::DelegateCall* call = instr->args_as_DelegateCall();
      if (call == nullptr) continue;
      ++calls;
      ASSERT_NE(call->inputs(), nullptr);
      EXPECT_EQ(call->inputs()->size(), whole ? 8u : 7u);
      for (uint32_t v : *call->inputs()) EXPECT_EQ(mg.values()->Get(v)->storage_type(), fb::Storage::PlannedStorage);
    }
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(mg.instructions()->size(), whole ? 1u : 3u);

    ASSERT_EQ(m.delegates()->size(), 1u);
    const fb::Delegate& del = *m.delegates()->Get(0);
    EXPECT_EQ(del.backend_id()->str(), "sim");
    const fb::Graph& sub = *del.payload_nested_root();
    for (const fb::NamedValue* nv : *sub.inputs()) {
      EXPECT_EQ(nv->name()->str().rfind("kv.", 0), std::string::npos) << nv->name()->str();
      EXPECT_EQ(sub.values()->Get(nv->value())->storage_type(), fb::Storage::NONE);
    }
    const uint32_t last = sub.instructions()->size() - 1;
    std::vector<std::string> found;
    std::vector<uint32_t> state_values;
    for (uint32_t v = 0; v < sub.values()->size(); ++v) {
      const fb::Tensor& t = *sub.values()->Get(v);
      const fb::StateStorage* st = t.storage_as_StateStorage();
      if (st == nullptr) continue;
      found.push_back(st->name()->str());
      state_values.push_back(v);
      // The runtime's rule: dtype and dims as declared; a symbolic dim's sym names this payload's
      // own symbol, whose name is the declaration's Program symbol's name.
      const fb::StateDecl* decl = nullptr;
      for (const fb::StateDecl* s : *prog.states()) {
        if (s->name()->str() == st->name()->str()) decl = s;
      }
      ASSERT_NE(decl, nullptr) << st->name()->str();
      EXPECT_EQ(t.dtype(), decl->dtype());
      EXPECT_EQ(t.dtype(), fb::ScalarType::F32);
      EXPECT_EQ(t.dim_order(), fb::DimOrder::Contiguous);
      ASSERT_EQ(t.dims()->size(), decl->dims()->size());
      ASSERT_EQ(t.dims()->size(), 4u);
      for (uint32_t k = 0; k < t.dims()->size(); ++k) {
        const fb::Dim* pd = t.dims()->Get(k);
        const fb::Dim* dd = decl->dims()->Get(k);
        EXPECT_EQ(pd->max(), dd->max());
        EXPECT_EQ(pd->sym() != 0, dd->sym() != 0) << "dim " << k;
        if (pd->sym() == 0 || dd->sym() == 0) continue;
        ASSERT_LE(pd->sym(), sub.symbols()->size());
        ASSERT_LE(dd->sym(), prog.symbols()->size());
        const fb::Symbol& ps = *sub.symbols()->Get(pd->sym() - 1u);
        const fb::Symbol& ds = *prog.symbols()->Get(dd->sym() - 1u);
        EXPECT_EQ(ps.name()->str(), "num_blocks");
        EXPECT_EQ(ps.name()->str(), ds.name()->str());
        EXPECT_EQ(ps.min(), ds.min());
        EXPECT_EQ(ps.max(), ds.max());
      }
      // num_blocks is the example's 4th graph symbol but the Program's 1st: the payload keeps the
      // graph's numbering, the declaration the Program's.
      EXPECT_EQ(t.dims()->Get(0)->sym(), 4);
      EXPECT_EQ(decl->dims()->Get(0)->sym(), 1);
      EXPECT_EQ(t.nbytes(), 16u * 4 * 2 * 8 * 4);
      // State persists across calls: live over the whole payload.
      EXPECT_EQ(sub.lifetimes()->Get(v)->first(), 0u);
      EXPECT_EQ(sub.lifetimes()->Get(v)->last(), last);
    }
    EXPECT_EQ(found, (std::vector<std::string>{"kv.0.k", "kv.0.v"}));
    // paged_attention writes them in place through inputs 3 and 4.
    const fb::KernelCall* attn = sub.instructions()->Get(0)->args_as_KernelCall();
    ASSERT_NE(attn, nullptr);
    EXPECT_EQ(attn->op(), fb::OpCode::PagedAttention);
    ASSERT_EQ(state_values.size(), 2u);
    EXPECT_EQ(static_cast<uint32_t>(attn->inputs()->Get(3)), state_values[0]);
    EXPECT_EQ(static_cast<uint32_t>(attn->inputs()->Get(4)), state_values[1]);
    EXPECT_NE(format_summary(r, true).find("; state kv.0.k, kv.0.v"), std::string::npos) << format_summary(r);
  }
}

// ---- Quantized weights. ----------------------------------------------------------------------------

// x [batch, 160] -> linear(w [200, 160], bias) -> relu, with the weight quantized by `preset`.
// "sim" takes the quantized linear only in the layouts it lists; relu stays portable.
CapabilityManifest quant_manifest(const std::string& sim_layouts_json) {
  return CapabilityManifest::parse(R"({"format": 1, "kernels": [
      {"op": "relu", "dtypes": ["f32","f32"], "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f32","f32","f32"], "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "per_tensor", "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "per_channel", "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "block2d", "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "mx", "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f4_e2m1","f32","f32"], "quant": "nvfp4", "library": "cpu"}],
    "backends": [{"id": "sim", "ops": [)" + sim_layouts_json + "]}]}",
                                   "quant manifest");
}

const char* kSimAllLayouts = R"(
    {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "dim_order": "contiguous", "quant": "per_tensor"},
    {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "dim_order": "contiguous", "quant": "per_channel"},
    {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "block2d"},
    {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "mx"},
    {"op": "linear", "dtypes": ["f32","f4_e2m1","f32","f32"], "quant": "nvfp4"})";

Graph quant_graph() {
  GraphBuilder b(5);
  b.symbol("batch", 1, 4);
  const ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 160});
  const ValueId w = b.random_normal("w", {200, 160}, 0.0f, 0.08f);
  const ValueId bias = b.random_normal("bias", {200}, 0.0f, 0.1f);
  b.output("y", b.relu(b.linear(x, w, bias, "fc"), "act"));
  return b.build();
}

ExportResult export_quantized(QuantPreset preset, const CapabilityManifest& manifest,
                              const std::vector<std::string>& backends) {
  ExportOptions options;
  options.backends = backends;
  options.manifest = &manifest;
  QuantizeOptions q;
  q.preset = preset;
  q.min_size = 1;
  options.quantize = q;
  return export_graph(quant_graph(), options);
}

// The quantized weight of a graph: the value (2-D, with QuantInfo) a Linear reads as input 1.
const fb::Tensor* quantized_weight(const fb::Graph& g) {
  for (const fb::Instruction* instr : *g.instructions()) {
    const fb::KernelCall* call = instr->args_as_KernelCall();
    if (call == nullptr || call->op() != fb::OpCode::Linear) continue;
    return g.values()->Get(static_cast<uint32_t>(call->inputs()->Get(1)));
  }
  return nullptr;
}

TEST(DelegatePayloadTest, QuantizedWeightTravelsWithItsScalesByReference) {
  const CapabilityManifest manifest = quant_manifest(kSimAllLayouts);
  for (QuantPreset preset : {QuantPreset::Fp8, QuantPreset::Fp8Block, QuantPreset::Fp8Dynamic, QuantPreset::Mxfp8,
                             QuantPreset::Nvfp4}) {
    SCOPED_TRACE(to_string(preset));
    const ExportResult portable = export_quantized(preset, manifest, {"portable"});
    const ExportResult delegated = export_quantized(preset, manifest, {"sim", "portable"});
    ASSERT_TRUE(portable.partition.delegates.empty());
    ASSERT_EQ(delegated.partition.delegates.size(), 1u);
    EXPECT_EQ(delegated.partition.delegates[0].constants.size(), 2u);  // weight and bias
    EXPECT_EQ(testing::validate_with_runtime(portable.program.bytes), "");
    EXPECT_EQ(testing::validate_with_runtime(delegated.program.bytes), "");
    EXPECT_TRUE(check_overlaps(delegated.program.bytes).empty());

    // The constants are the same bytes at the same places: nothing is duplicated for the payload.
    EXPECT_EQ(delegated.program.constant_bytes, portable.program.constant_bytes);
    EXPECT_EQ(delegated.program.constant_count, portable.program.constant_count);
    const fb::Program& pp = parse_program(portable.program.bytes);
    const fb::Program& dp = parse_program(delegated.program.bytes);
    ASSERT_NE(constants_segment(pp), nullptr);
    ASSERT_NE(constants_segment(dp), nullptr);
    EXPECT_EQ(constants_segment(dp)->size(), constants_segment(pp)->size());
    EXPECT_EQ(constants_segment(dp)->xxh64(), constants_segment(pp)->xxh64());

    const fb::Graph& method = *pp.methods()->Get(0)->graph();
    const fb::Method& dm = *dp.methods()->Get(0);
    ASSERT_EQ(dm.delegates()->size(), 1u);
    const fb::Graph& sub = *dm.delegates()->Get(0)->payload_nested_root();
    // The delegated Method holds no quantized value: the weight lives only in the payload.
    for (const fb::Tensor* t : *dm.graph()->values()) EXPECT_EQ(t->quant(), nullptr);
    const fb::Tensor* mw = quantized_weight(method);
    const fb::Tensor* sw = quantized_weight(sub);
    ASSERT_NE(mw, nullptr);
    ASSERT_NE(sw, nullptr);
    ASSERT_NE(mw->quant(), nullptr);
    ASSERT_NE(sw->quant(), nullptr);
    EXPECT_EQ(sw->dtype(), mw->dtype());
    ASSERT_NE(sw->storage_as_ConstantStorage(), nullptr);
    EXPECT_EQ(sw->storage_as_ConstantStorage()->segment(), mw->storage_as_ConstantStorage()->segment());
    EXPECT_EQ(sw->storage_as_ConstantStorage()->offset(), mw->storage_as_ConstantStorage()->offset());

    const fb::QuantInfo& mq = *mw->quant();
    const fb::QuantInfo& sq = *sw->quant();
    EXPECT_EQ(sq.scale_dtype(), mq.scale_dtype());
    EXPECT_EQ(sq.scale_layout(), fb::ScaleLayout::RowMajor);
    ASSERT_EQ(sq.block()->size(), 2u);
    EXPECT_EQ(sq.block()->Get(0), mq.block()->Get(0));
    EXPECT_EQ(sq.block()->Get(1), mq.block()->Get(1));
    auto same_constant = [&](uint32_t sub_value, uint32_t method_value) {
      const fb::Tensor& s = *sub.values()->Get(sub_value);
      const fb::Tensor& m = *method.values()->Get(method_value);
      ASSERT_NE(s.storage_as_ConstantStorage(), nullptr);
      ASSERT_NE(m.storage_as_ConstantStorage(), nullptr);
      EXPECT_EQ(s.storage_as_ConstantStorage()->segment(), m.storage_as_ConstantStorage()->segment());
      EXPECT_EQ(s.storage_as_ConstantStorage()->offset(), m.storage_as_ConstantStorage()->offset());
      EXPECT_EQ(s.dtype(), m.dtype());
      EXPECT_EQ(s.nbytes(), m.nbytes());
      EXPECT_EQ(s.quant(), nullptr);
      EXPECT_EQ(sub.lifetimes()->Get(sub_value)->first(), 0u);
      EXPECT_EQ(sub.lifetimes()->Get(sub_value)->last(), sub.instructions()->size() - 1);
    };
    same_constant(sq.scale(), mq.scale());
    const bool nvfp4 = preset == QuantPreset::Nvfp4;
    EXPECT_EQ(sq.global_scale() >= 0, nvfp4);
    EXPECT_EQ(mq.global_scale() >= 0, nvfp4);
    if (nvfp4) {
      EXPECT_EQ(sw->dtype(), fb::ScalarType::F4E2M1);
      EXPECT_EQ(sq.scale_dtype(), fb::ScalarType::UE4M3);
      same_constant(static_cast<uint32_t>(sq.global_scale()), static_cast<uint32_t>(mq.global_scale()));
    }
    // W8A8: the linear's activation quantization travels in its attributes.
    const fb::KernelCall* linear = sub.instructions()->Get(0)->args_as_KernelCall();
    ASSERT_NE(linear, nullptr);
    ASSERT_NE(linear->attrs_as_LinearAttrs(), nullptr);
    EXPECT_EQ(linear->attrs_as_LinearAttrs()->activation_quant(), preset == QuantPreset::Fp8Dynamic
                                                                      ? fb::ActivationQuant::Fp8PerToken
                                                                      : fb::ActivationQuant::None);
  }
}

// A hand-made FP8 per-tensor weight (no preset makes one) delegated like the others.
TEST(DelegatePayloadTest, PerTensorFp8WeightInAPayload) {
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {2, 32});
  auto q = std::make_shared<QuantParams>();
  q->scale_dtype = ScalarType::F32;
  q->block = {16, 32};
  q->scale_dims = {1, 1};
  const float scale = 0.25f;
  q->scale = std::make_shared<const std::vector<uint8_t>>(reinterpret_cast<const uint8_t*>(&scale),
                                                           reinterpret_cast<const uint8_t*>(&scale) + sizeof(scale));
  const ValueId w = b.constant_quantized("w", ScalarType::F8E4M3FN, {16, 32}, std::vector<uint8_t>(16 * 32, 0x38), q);
  const ValueId bias = b.random_uniform("bias", {16}, -1, 1);
  b.output("y", b.linear(x, w, bias, "fc"));
  const Graph g = b.build();
  const CapabilityManifest manifest = quant_manifest(kSimAllLayouts);
  ExportOptions options;
  options.manifest = &manifest;
  options.backends = {"sim", "portable"};
  const ExportResult r = export_graph(g, options);
  ASSERT_EQ(r.partition.delegates.size(), 1u);
  EXPECT_EQ(testing::validate_with_runtime(r.program.bytes), "");
  const fb::Program& prog = parse_program(r.program.bytes);
  const fb::Graph& sub = *prog.methods()->Get(0)->delegates()->Get(0)->payload_nested_root();
  const fb::Tensor* sw = quantized_weight(sub);
  ASSERT_NE(sw, nullptr);
  ASSERT_NE(sw->quant(), nullptr);
  EXPECT_EQ(sw->quant()->block()->Get(0), 16);
  const fb::Tensor& s = *sub.values()->Get(sw->quant()->scale());
  ASSERT_NE(s.storage_as_ConstantStorage(), nullptr);
  EXPECT_EQ(s.dtype(), fb::ScalarType::F32);
  EXPECT_EQ(s.nbytes(), 4u);
  // Weight 512 bytes, bias 64, scale 4; each stored once.
  EXPECT_EQ(r.program.constant_bytes, 512u + 64u + 4u);
}

}  // namespace
}  // namespace ember::exporter
