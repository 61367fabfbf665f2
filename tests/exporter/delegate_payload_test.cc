// GRAPH delegate payloads that device backends need: program state (the KV cache) claimed by the
// delegate and named by StateStorage inside the payload.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exporter/importers/builder/examples.h"
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
    EXPECT_NE(format_summary(r).find("; state kv.0.k, kv.0.v"), std::string::npos) << format_summary(r);
  }
}

}  // namespace
}  // namespace ember::exporter
