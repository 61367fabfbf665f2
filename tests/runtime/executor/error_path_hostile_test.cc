// Hostile FlatBuffers (docs/DESIGN.md §8): programs with correct CRCs whose tables lie (indices, offsets,
// sizes, union tags, delegates) reach the verifier and the validator, which reject each with its
// documented Error and a non-empty message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "schema/program_generated.h"
#include "tests/common/pte_edit.h"
#include "tests/runtime/executor/error_path_util.h"

namespace ember {
namespace {

using testing::ErrorPathTest;
using testing::Example;
using testing::LoadAndRun;
using testing::MethodGraph;
using testing::Outcome;
using testing::WithVerification;

// ---- Hostile FlatBuffers (CRCs correct, so they reach the verifier and the validator). -------------

fb::KernelCallT* FirstKernelCall(fb::GraphT& g) {
  for (auto& ins : g.instructions) {
    if (ins->args.type == fb::InstructionArgs::KernelCall) return ins->args.AsKernelCall();
  }
  return nullptr;
}

fb::TensorT* FirstWithStorage(fb::GraphT& g, fb::Storage kind) {
  for (auto& v : g.values) {
    if (v->storage.type == kind) return v.get();
  }
  return nullptr;
}

struct Hostile {
  const char* name;
  const char* example;
  std::function<void(fb::ProgramT&)> edit;
  Error expected;
  const char* substring;  // expected in the message
};

std::vector<Hostile> HostileCases() {
  using P = fb::ProgramT;
  std::vector<Hostile> cases;
  cases.push_back({"kernel input value index out of range", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     FirstKernelCall(g)->inputs[0] = static_cast<int32_t>(g.values.size() + 5);
                   }, Error::InvalidProgram, "input value"});
  cases.push_back({"kernel input -1 at a required position", "mlp", [](P& p) {
                     FirstKernelCall(MethodGraph(p))->inputs[0] = -1;
                   }, Error::InvalidProgram, "input value -1"});
  cases.push_back({"kernel output value index out of range", "mlp", [](P& p) {
                     FirstKernelCall(MethodGraph(p))->outputs[0] = 0xFFFFFFF0u;
                   }, Error::InvalidProgram, "output value"});
  cases.push_back({"kernel writes a constant", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     for (size_t v = 0; v < g.values.size(); ++v) {
                       if (g.values[v]->storage.type == fb::Storage::ConstantStorage) {
                         FirstKernelCall(g)->outputs[0] = static_cast<uint32_t>(v);
                         return;
                       }
                     }
                   }, Error::InvalidProgram, "writes constant"});
  // conv2d's fused output clamp (the cnn examples' conv1 carries relu1 as [0, +inf]).
  cases.push_back({"conv2d clamp with a NaN bound", "cnn", [](P& p) {
                     FirstKernelCall(MethodGraph(p))->attrs.AsConv2dAttrs()->out_max = std::nanf("");
                   }, Error::InvalidProgram, "instruction 0: conv2d output clamp [0, nan] has a NaN bound"});
  cases.push_back({"conv2d clamp with min > max", "cnn", [](P& p) {
                     fb::Conv2dAttrsT* a = FirstKernelCall(MethodGraph(p))->attrs.AsConv2dAttrs();
                     a->out_min = 2.0f;
                     a->out_max = 1.5f;
                   }, Error::InvalidProgram, "instruction 0: conv2d output clamp min 2 > max 1.5"});
  cases.push_back({"delegate graph: conv2d clamp with min > max", "cnn_null", [](P& p) {
                     testing::mutate_payload(*p.methods[0]->delegates[0], [](fb::GraphT& g) {
                       FirstKernelCall(g)->attrs.AsConv2dAttrs()->out_min = 1.0f;
                       FirstKernelCall(g)->attrs.AsConv2dAttrs()->out_max = -1.0f;
                     });
                   }, Error::InvalidProgram, "conv2d output clamp min 1 > max -1"});
  cases.push_back({"graph input index out of range", "mlp", [](P& p) {
                     MethodGraph(p).inputs[0]->value = 100000;
                   }, Error::InvalidProgram, "input 0"});
  cases.push_back({"constant offset beyond its segment", "mlp", [](P& p) {
                     FirstWithStorage(MethodGraph(p), fb::Storage::ConstantStorage)->storage.AsConstantStorage()->offset =
                         uint64_t{1} << 40;
                   }, Error::InvalidProgram, "outside segment"});
  cases.push_back({"constant offset + nbytes overflows", "mlp", [](P& p) {
                     FirstWithStorage(MethodGraph(p), fb::Storage::ConstantStorage)->storage.AsConstantStorage()->offset =
                         UINT64_MAX - 63;
                   }, Error::InvalidProgram, "outside segment"});
  cases.push_back({"constant offset misaligned", "mlp", [](P& p) {
                     FirstWithStorage(MethodGraph(p), fb::Storage::ConstantStorage)->storage.AsConstantStorage()->offset += 4;
                   }, Error::InvalidProgram, "misaligned"});
  cases.push_back({"constant segment index out of range", "mlp", [](P& p) {
                     FirstWithStorage(MethodGraph(p), fb::Storage::ConstantStorage)->storage.AsConstantStorage()->segment = 77;
                   }, Error::InvalidProgram, "segment 77"});
  cases.push_back({"planned offset beyond the arena", "mlp", [](P& p) {
                     fb::TensorT* t = FirstWithStorage(MethodGraph(p), fb::Storage::PlannedStorage);
                     fb::PlannedStorageT* s = t->storage.AsPlannedStorage();
                     s->offset = (p.methods[0]->arenas[s->arena]->size + 64) / 64 * 64;
                   }, Error::InvalidProgram, "outside arena"});
  cases.push_back({"planned tensor ends one byte past the arena", "mlp", [](P& p) {
                     fb::TensorT* t = FirstWithStorage(MethodGraph(p), fb::Storage::PlannedStorage);
                     fb::ArenaT& a = *p.methods[0]->arenas[t->storage.AsPlannedStorage()->arena];
                     a.size = t->storage.AsPlannedStorage()->offset + t->nbytes - 1;
                   }, Error::InvalidProgram, "outside arena"});
  cases.push_back({"planned arena index out of range", "mlp", [](P& p) {
                     FirstWithStorage(MethodGraph(p), fb::Storage::PlannedStorage)->storage.AsPlannedStorage()->arena = 9;
                   }, Error::InvalidProgram, "arena 9"});
  cases.push_back({"value without storage", "mlp", [](P& p) {
                     FirstWithStorage(MethodGraph(p), fb::Storage::PlannedStorage)->storage.Reset();
                   }, Error::InvalidProgram, "no storage"});
  cases.push_back({"dim names a symbol that does not exist", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     for (auto& v : g.values) {
                       if (!v->dims.empty() && v->dims[0].sym() != 0) {
                         v->dims[0] = fb::Dim(v->dims[0].max(), static_cast<uint16_t>(g.symbols.size() + 1));
                         return;
                       }
                     }
                   }, Error::InvalidProgram, "names symbol"});
  // A unary kernel call turned into a Slice whose end names a symbol the graph does not have.
  auto slice_with_end_sym = [](P& p, std::vector<uint16_t> ends_sym) {
    for (auto& ins : MethodGraph(p).instructions) {
      fb::KernelCallT* call = ins->args.AsKernelCall();
      if (call == nullptr || call->op != fb::OpCode::Relu) continue;
      call->op = fb::OpCode::Slice;
      fb::SliceAttrsT a;
      a.axes = {1};
      a.starts = {0};
      a.ends = {4};
      a.steps = {1};
      a.ends_sym = std::move(ends_sym);
      call->attrs.Set(std::move(a));
      return;
    }
  };
  cases.push_back({"slice end names a symbol that does not exist", "mlp", [slice_with_end_sym](P& p) {
                     slice_with_end_sym(p, {static_cast<uint16_t>(MethodGraph(p).symbols.size() + 1)});
                   }, Error::InvalidProgram, "slice ends_sym[0] names symbol"});
  cases.push_back({"slice ends_sym of the wrong length", "mlp", [slice_with_end_sym](P& p) {
                     slice_with_end_sym(p, {1, 1});
                   }, Error::InvalidProgram, "ends_sym has 2 entries for 1 axes"});
  cases.push_back({"symbol with min > max", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     g.symbols[0]->min = g.symbols[0]->max + 1;
                   }, Error::InvalidProgram, "bounds"});
  cases.push_back({"negative dim", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     for (auto& v : g.values) {
                       if (!v->dims.empty() && v->dims.back().sym() == 0) {
                         v->dims.back() = fb::Dim(-4, 0);
                         return;
                       }
                     }
                   }, Error::InvalidProgram, "dim"});
  cases.push_back({"invalid dtype", "mlp", [](P& p) {
                     MethodGraph(p).values[0]->dtype = static_cast<fb::ScalarType>(200);
                   }, Error::InvalidProgram, "dtype"});
  cases.push_back({"nbytes disagrees with dims", "mlp", [](P& p) {
                     MethodGraph(p).values[0]->nbytes += 4;
                   }, Error::InvalidProgram, "nbytes"});
  cases.push_back({"rank above 8", "mlp", [](P& p) {
                     fb::TensorT& t = *MethodGraph(p).values[0];
                     while (t.dims.size() <= 8) t.dims.push_back(fb::Dim(1, 0));
                   }, Error::InvalidProgram, "rank"});
  cases.push_back({"NONE instruction", "mlp", [](P& p) {
                     MethodGraph(p).instructions[0]->args.Reset();
                   }, Error::InvalidProgram, "instruction kind"});
  cases.push_back({"unknown instruction union tag", "mlp", [](P& p) {
                     MethodGraph(p).instructions[0]->args.Reset();
                     MethodGraph(p).instructions[0]->args.type = static_cast<fb::InstructionArgs>(99);
                   }, Error::InvalidProgram, "instruction kind 99"});
  cases.push_back({"unknown op code", "mlp", [](P& p) {
                     FirstKernelCall(MethodGraph(p))->op = static_cast<fb::OpCode>(999);
                   }, Error::InvalidProgram, "op code 999"});
  cases.push_back({"wrong attribute table for the op", "mlp", [](P& p) {
                     fb::KernelCallT* call = FirstKernelCall(MethodGraph(p));
                     call->attrs.Reset();
                     fb::AxisAttrsT axis;
                     axis.axis = 1;
                     call->attrs.Set(axis);
                   }, Error::InvalidProgram, "attribute table"});
  cases.push_back({"unknown attribute union tag", "mlp", [](P& p) {
                     fb::KernelCallT* call = FirstKernelCall(MethodGraph(p));
                     call->attrs.Reset();
                     call->attrs.type = static_cast<fb::Attributes>(200);
                   }, Error::InvalidProgram, "attribute table"});
  cases.push_back({"jump target beyond the end", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     auto cond = std::make_unique<fb::TensorT>();
                     cond->dtype = fb::ScalarType::Bool;
                     cond->dim_order = fb::DimOrder::Contiguous;
                     fb::PlannedStorageT storage;
                     storage.arena = 0;
                     storage.offset = 0;
                     cond->storage.Set(storage);
                     cond->nbytes = 1;
                     g.values.push_back(std::move(cond));
                     if (!g.lifetimes.empty()) g.lifetimes.emplace_back(0, 0);
                     fb::JumpIfFalseT jump;
                     jump.cond = static_cast<uint32_t>(g.values.size() - 1);
                     jump.target = static_cast<uint32_t>(g.instructions.size() + 2);
                     auto ins = std::make_unique<fb::InstructionT>();
                     ins->args.Set(jump);
                     g.instructions.insert(g.instructions.begin(), std::move(ins));
                   }, Error::InvalidProgram, "jump target"});
  cases.push_back({"move between different sizes", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     fb::MoveT move;
                     move.src = g.inputs[0]->value;
                     move.dst = g.outputs[0]->value;
                     auto ins = std::make_unique<fb::InstructionT>();
                     ins->args.Set(move);
                     g.instructions.push_back(std::move(ins));
                   }, Error::InvalidProgram, "move"});
  cases.push_back({"move between equal sizes but different dims", "mlp", [](P& p) {
                     // Review fix: the validator only compared nbytes; the destination then took the
                     // source's rank and dims behind the load-time shape checks.
                     fb::GraphT& g = MethodGraph(p);
                     for (size_t v = 0; v < g.values.size(); ++v) {
                       const fb::TensorT& src = *g.values[v];
                       if (src.storage.type != fb::Storage::PlannedStorage || src.dims.size() < 2) continue;
                       auto dst = std::make_unique<fb::TensorT>(src);
                       int64_t numel = 1;
                       for (const fb::Dim& d : src.dims) numel *= d.max();
                       dst->dims = {fb::Dim(numel, 0)};  // same dtype and nbytes, rank 1
                       g.values.push_back(std::move(dst));
                       if (!g.lifetimes.empty()) g.lifetimes.emplace_back(0, 0);
                       fb::MoveT move;
                       move.src = static_cast<uint32_t>(v);
                       move.dst = static_cast<uint32_t>(g.values.size() - 1);
                       auto ins = std::make_unique<fb::InstructionT>();
                       ins->args.Set(move);
                       g.instructions.push_back(std::move(ins));
                       return;
                     }
                   }, Error::InvalidProgram, "different dims"});
  cases.push_back({"arena alignment not a power of two", "mlp", [](P& p) {
                     p.methods[0]->arenas[0]->alignment = 96;
                   }, Error::InvalidProgram, "alignment 96"});
  cases.push_back({"arena alignment zero", "mlp", [](P& p) {
                     p.methods[0]->arenas[0]->alignment = 0;
                   }, Error::InvalidProgram, "alignment 0"});
  cases.push_back({"arena alignment below 64", "mlp", [](P& p) {
                     p.methods[0]->arenas[0]->alignment = 32;
                   }, Error::InvalidProgram, "alignment 32"});
  cases.push_back({"arena id differs from its index", "mlp", [](P& p) {
                     p.methods[0]->arenas[0]->id = 5;
                   }, Error::InvalidProgram, "id 5"});
  cases.push_back({"arena of an invalid kind", "mlp", [](P& p) {
                     p.methods[0]->arenas[0]->kind = static_cast<fb::ArenaKind>(42);
                   }, Error::InvalidProgram, "kind 42"});
  cases.push_back({"huge arena", "mlp", [](P& p) {
                     p.methods[0]->arenas[0]->size = uint64_t{1} << 50;
                   }, Error::InvalidProgram, "size"});
  cases.push_back({"lifetimes do not match values", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     g.lifetimes.resize(g.values.size() + 1, fb::Lifetime(0, 0));
                   }, Error::InvalidProgram, "lifetimes"});
  cases.push_back({"lifetime past the last instruction", "mlp", [](P& p) {
                     fb::GraphT& g = MethodGraph(p);
                     g.lifetimes.assign(g.values.size(), fb::Lifetime(0, 0));
                     g.lifetimes[0] = fb::Lifetime(0, static_cast<uint32_t>(g.instructions.size()));
                   }, Error::InvalidProgram, "lifetime"});
  cases.push_back({"no methods", "mlp", [](P& p) { p.methods.clear(); }, Error::InvalidProgram, "no methods"});
  cases.push_back({"two methods with one name", "mlp", [](P& p) {
                     auto copy = std::make_unique<fb::MethodT>(*p.methods[0]);
                     p.methods.push_back(std::move(copy));
                   }, Error::InvalidProgram, "twice"});
  cases.push_back({"segment outside the segment area", "mlp", [](P& p) {
                     p.segments[0]->offset = uint64_t{1} << 32;
                   }, Error::InvalidProgram, "segment 0"});
  cases.push_back({"segment hash wrong", "mlp", [](P& p) { p.segments[0]->xxh64 ^= 1; }, Error::IntegrityError,
                   "segment 0 checksum"});
  cases.push_back({"state without the state feature bit", "mlp", [](P& p) {
                     auto s = std::make_unique<fb::StateDeclT>();
                     s->name = "kv";
                     s->dtype = fb::ScalarType::F32;
                     p.states.push_back(std::move(s));
                   }, Error::InvalidProgram, "state"});
  // Program state (paged_attention: the KV cache kv.0.k / kv.0.v, written in place).
  cases.push_back({"paged attention's cache is not state", "paged_attention", [](P& p) {
                     for (auto& ins : MethodGraph(p).instructions) {
                       auto* call = ins->args.AsKernelCall();
                       if (call != nullptr && call->op == fb::OpCode::PagedAttention) call->inputs[3] = call->inputs[1];
                     }
                   }, Error::InvalidProgram, "is written in place and must be program state"});
  cases.push_back({"state value dims differ from the declaration", "paged_attention", [](P& p) {
                     p.states[0]->dims[1] = fb::Dim(8, 0);
                   }, Error::InvalidProgram, "differ from its declaration"});
  cases.push_back({"state names an undeclared state", "paged_attention", [](P& p) {
                     for (auto& v : MethodGraph(p).values) {
                       if (v->storage.type == fb::Storage::StateStorage) v->storage.AsStateStorage()->name = "kv.9.k";
                     }
                   }, Error::InvalidProgram, "is not declared"});
  // Delegates (cnn_null has one GRAPH delegate for "null").
  cases.push_back({"delegate call index out of range", "cnn_null", [](P& p) {
                     for (auto& ins : MethodGraph(p).instructions) {
                       if (ins->args.type == fb::InstructionArgs::DelegateCall) ins->args.AsDelegateCall()->index = 3;
                     }
                   }, Error::InvalidProgram, "delegate 3"});
  cases.push_back({"delegate call passes the wrong number of inputs", "cnn_null", [](P& p) {
                     for (auto& ins : MethodGraph(p).instructions) {
                       if (ins->args.type == fb::InstructionArgs::DelegateCall) {
                         auto* call = ins->args.AsDelegateCall();
                         call->inputs.push_back(call->inputs[0]);
                       }
                     }
                   }, Error::InvalidProgram, "inputs"});
  cases.push_back({"delegate takes as static a dim the caller has symbolic", "cnn_null", [](P& p) {
                     // Review fix: the callee (static, no shape re-runs) would get smaller run-time dims.
                     fb::GraphT& g = MethodGraph(p);
                     for (auto& ins : g.instructions) {
                       if (ins->args.type != fb::InstructionArgs::DelegateCall) continue;
                       fb::TensorT& t = *g.values[ins->args.AsDelegateCall()->inputs[0]];
                       const size_t d = t.dims.size() - 1;
                       auto sym = std::make_unique<fb::SymbolT>();
                       sym->name = "w";
                       sym->min = 1;
                       sym->max = t.dims[d].max();
                       g.symbols.push_back(std::move(sym));
                       t.dims[d] = fb::Dim(t.dims[d].max(), static_cast<uint16_t>(g.symbols.size()));
                       return;
                     }
                   }, Error::InvalidProgram, "delegate input 0"});
  cases.push_back({"delegate with an empty backend id", "cnn_null", [](P& p) {
                     p.methods[0]->delegates[0]->backend_id = "";
                   }, Error::InvalidProgram, "backend id"});
  cases.push_back({"delegate of an invalid format", "cnn_null", [](P& p) {
                     p.methods[0]->delegates[0]->format = static_cast<fb::DelegateFormat>(9);
                   }, Error::InvalidProgram, "format"});
  cases.push_back({"GRAPH delegate without payload", "cnn_null", [](P& p) {
                     p.methods[0]->delegates[0]->payload.clear();
                   }, Error::InvalidProgram, ""});
  cases.push_back({"garbage GRAPH payload", "cnn_null", [](P& p) {
                     auto& payload = p.methods[0]->delegates[0]->payload;
                     for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 37 + 11);
                   }, Error::InvalidProgram, ""});
  cases.push_back({"OPAQUE delegate naming no blob segment", "cnn_null", [](P& p) {
                     p.methods[0]->delegates[0]->format = fb::DelegateFormat::Opaque;
                     p.methods[0]->delegates[0]->segment = 0;  // the Constants segment
                   }, Error::InvalidProgram, "OPAQUE"});
  cases.push_back({"delegate graph: kernel input out of range", "cnn_null", [](P& p) {
                     testing::mutate_payload(*p.methods[0]->delegates[0], [](fb::GraphT& g) {
                       FirstKernelCall(g)->inputs[0] = 4000;
                     });
                   }, Error::InvalidProgram, "delegate 0 graph"});
  cases.push_back({"delegate graph: planned offset beyond the arena", "cnn_null", [&](P& p) {
                     const uint64_t size = p.methods[0]->arenas[0]->size;
                     testing::mutate_payload(*p.methods[0]->delegates[0], [size](fb::GraphT& g) {
                       fb::TensorT* t = FirstWithStorage(g, fb::Storage::PlannedStorage);
                       if (t != nullptr) t->storage.AsPlannedStorage()->offset = (size + 64) / 64 * 64;
                     });
                   }, Error::InvalidProgram, "outside arena"});
  cases.push_back({"delegate graph: constant outside the segment", "cnn_null", [](P& p) {
                     testing::mutate_payload(*p.methods[0]->delegates[0], [](fb::GraphT& g) {
                       FirstWithStorage(g, fb::Storage::ConstantStorage)->storage.AsConstantStorage()->offset = 1ull << 40;
                     });
                   }, Error::InvalidProgram, "outside segment"});
  cases.push_back({"delegate graph calls a delegate", "cnn_null", [](P& p) {
                     testing::mutate_payload(*p.methods[0]->delegates[0], [](fb::GraphT& g) {
                       fb::DelegateCallT call;
                       call.index = 0;
                       g.instructions[0]->args.Reset();
                       g.instructions[0]->args.Set(call);
                     });
                   }, Error::InvalidProgram, "cannot call a delegate"});
  cases.push_back({"delegate graph: NONE instruction", "cnn_null", [](P& p) {
                     testing::mutate_payload(*p.methods[0]->delegates[0],
                                             [](fb::GraphT& g) { g.instructions[0]->args.Reset(); });
                   }, Error::InvalidProgram, "instruction kind"});
  return cases;
}

TEST_F(ErrorPathTest, HostileFlatBuffersAreRejectedByTheValidator) {
  for (const Hostile& c : HostileCases()) {
    SCOPED_TRACE(c.name);
    const std::vector<uint8_t> file = testing::mutate_program(Example(c.example), c.edit);
    for (Verification v : {Verification::Full, Verification::Structural}) {
      const Outcome o = LoadAndRun(file, rt_.context, WithVerification(v));
      const Error expected = (c.expected == Error::IntegrityError && v == Verification::Structural) ? Error::Ok
                                                                                                   : c.expected;
      EXPECT_EQ(o.code, expected) << "verification " << int(v) << ": " << to_string(o.code) << " '" << o.message << "'";
      if (expected != Error::Ok) {
        EXPECT_FALSE(o.message.empty());
        EXPECT_NE(o.message.find(c.substring), std::string::npos) << o.message;
      }
    }
  }
}

// A jump back to itself would loop forever; the step budget stops it with Cancelled.
TEST_F(ErrorPathTest, EndlessJumpLoopStopsWithCancelled) {
  std::vector<uint8_t> file = testing::mutate_program(Example("mlp"), [](fb::ProgramT& p) {
    p.required_features |= kFeatureControlFlow;
    fb::GraphT& g = MethodGraph(p);
    auto cond = std::make_unique<fb::TensorT>();  // a bool in the (zeroed) activation arena: false
    cond->dtype = fb::ScalarType::Bool;
    cond->dim_order = fb::DimOrder::Contiguous;
    fb::PlannedStorageT storage;
    storage.arena = 0;
    storage.offset = 0;
    cond->storage.Set(storage);
    cond->nbytes = 1;
    g.values.push_back(std::move(cond));
    if (!g.lifetimes.empty()) g.lifetimes.emplace_back(0, 0);
    fb::JumpIfFalseT jump;
    jump.cond = static_cast<uint32_t>(g.values.size() - 1);
    jump.target = 0;
    auto ins = std::make_unique<fb::InstructionT>();
    ins->args.Set(jump);
    g.instructions.insert(g.instructions.begin(), std::move(ins));
  });
  FileHeader h = testing::header_of(file);
  h.required_features |= kFeatureControlFlow;
  testing::write_header(file, h);
  testing::recompute_crcs(file);
  LoadOptions options;
  options.max_steps_per_execute = 100000;
  const Outcome o = LoadAndRun(file, rt_.context, options);
  EXPECT_EQ(o.code, Error::Cancelled) << o.message;
  EXPECT_NE(o.message.find("100000 instructions"), std::string::npos) << o.message;
}

// A conv2d clamp in a file without the conv_clamp feature bit (header and FlatBuffer agreeing) is
// refused, in the method and in a GRAPH delegate: a runtime that predates the clamp refuses the bit,
// so a file must not carry a clamp without it. With the bit, both load and run.
TEST_F(ErrorPathTest, ConvClampWithoutItsFeatureBitIsInvalidProgram) {
  for (const char* name : {"cnn", "cnn_null"}) {
    SCOPED_TRACE(name);
    ASSERT_NE(testing::header_of(Example(name)).required_features & kFeatureConvClamp, 0u);
    EXPECT_EQ(LoadAndRun(Example(name), rt_.context).code, Error::Ok);
    std::vector<uint8_t> file =
        testing::mutate_program(Example(name), [](fb::ProgramT& p) { p.required_features &= ~kFeatureConvClamp; });
    FileHeader h = testing::header_of(file);
    h.required_features &= ~kFeatureConvClamp;
    testing::write_header(file, h);
    testing::recompute_crcs(file);
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, Error::InvalidProgram) << o.message;
    EXPECT_NE(o.message.find("conv2d output clamp [0, inf] without the conv_clamp feature bit"), std::string::npos)
        << o.message;
  }
}

// Quantized tensors are refused until quantized kernels bind by their layout.
fb::TensorT* FirstQuantized(fb::GraphT& g) {
  for (auto& v : g.values) {
    if (v->quant) return v.get();
  }
  return nullptr;
}

// Quantized weights whose QuantInfo lies: the validator names the value and the rule.
TEST_F(ErrorPathTest, InconsistentQuantInfoIsRejected) {
  using P = fb::ProgramT;
  struct Case {
    const char* name;
    const char* example;
    std::function<void(P&)> edit;
    Error expected;
    const char* substring;
  };
  const std::vector<Case> cases = {
      {"scale names an activation", "mlp_fp8", [](P& p) {
         fb::GraphT& g = MethodGraph(p);
         FirstQuantized(g)->quant->scale = g.inputs[0]->value;
       }, Error::InvalidProgram, "must be a constant f32"},
      {"scale of the wrong shape", "mlp_fp8", [](P& p) {
         fb::GraphT& g = MethodGraph(p);
         fb::TensorT& s = *g.values[FirstQuantized(g)->quant->scale];
         s.dims = {fb::Dim(s.dims[0].max() / 2, 0), fb::Dim(2, 0)};  // same bytes, wrong shape
       }, Error::InvalidProgram, "must be a constant f32 [128, 1]"},
      {"scale dtype of another format", "mlp_fp8", [](P& p) {
         FirstQuantized(MethodGraph(p))->quant->scale_dtype = fb::ScalarType::E8M0;
       }, Error::NotSupported, "f8_e4m3fn data, e8m0 scales, block [1, 64] is not a supported layout"},
      {"quant info on an activation", "mlp_fp8", [](P& p) {
         fb::GraphT& g = MethodGraph(p);
         fb::TensorT* w = FirstQuantized(g);
         fb::TensorT* act = FirstWithStorage(g, fb::Storage::PlannedStorage);
         act->quant = std::make_unique<fb::QuantInfoT>(*w->quant);
       }, Error::InvalidProgram, "quantized tensor"},
      {"global scale that is not a scalar", "mlp_nvfp4", [](P& p) {
         fb::TensorT* w = FirstQuantized(MethodGraph(p));
         w->quant->global_scale = static_cast<int32_t>(w->quant->scale);
       }, Error::InvalidProgram, "must be a constant f32 scalar"},
      {"nvfp4 without its global scale", "mlp_nvfp4", [](P& p) {
         FirstQuantized(MethodGraph(p))->quant->global_scale = -1;
       }, Error::NotSupported, "is not a supported layout"},
      {"FP8 activations with an nvfp4 weight", "mlp_nvfp4", [](P& p) {
         for (auto& ins : MethodGraph(p).instructions) {
           fb::KernelCallT* call = ins->args.AsKernelCall();
           if (call != nullptr && call->op == fb::OpCode::Linear) {
             call->attrs.AsLinearAttrs()->activation_quant = fb::ActivationQuant::Fp8PerToken;
             return;
           }
         }
       }, Error::InvalidProgram, "needs an f8_e4m3fn weight with per-tensor or per-channel f32 scales"},
      {"FP8 activations with a 2-D block weight", "mlp_fp8_dynamic", [](P& p) {
         fb::GraphT& g = MethodGraph(p);
         fb::TensorT* w = FirstQuantized(g);
         w->quant->block[0] = 2;  // [128, 64] weight, scale [64, 1]: still consistent, not per channel
         fb::TensorT& s = *g.values[w->quant->scale];
         s.dims = {fb::Dim(64, 0), fb::Dim(1, 0)};
         s.nbytes = 64 * 4;
       }, Error::InvalidProgram, "needs an f8_e4m3fn weight with per-tensor or per-channel f32 scales"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<uint8_t> file = testing::mutate_program(Example(c.example), c.edit);
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, c.expected) << o.message;
    EXPECT_NE(o.message.find(c.substring), std::string::npos) << o.message;
  }
  // Unmutated, each quantized example loads and runs.
  for (const char* name : {"mlp_fp8", "mlp_fp8_dynamic", "mlp_nvfp4"}) {
    const Outcome o = LoadAndRun(Example(name), rt_.context);
    EXPECT_EQ(o.code, Error::Ok) << name << ": " << o.message;
  }
}

// Union fields whose tag names a member but whose table is absent: the FlatBuffers verifier accepts
// them (a null table verifies), so the validator must not dereference them. Made by dropping the
// field from the table's vtable (shared by every table of that layout), CRCs recomputed.
std::vector<uint8_t> DropField(const std::vector<uint8_t>& file, const void* table, uint16_t vtable_offset) {
  std::vector<uint8_t> out = file;
  const uint8_t* t = static_cast<const uint8_t*>(table);
  const uint8_t* vtable = t - flatbuffers::ReadScalar<flatbuffers::soffset_t>(t);
  const size_t at = static_cast<size_t>(vtable - file.data()) + vtable_offset;
  if (flatbuffers::ReadScalar<uint16_t>(vtable) > vtable_offset) {
    out[at] = 0;
    out[at + 1] = 0;
  }
  testing::recompute_crcs(out);
  return out;
}

TEST_F(ErrorPathTest, UnionTagWithoutTableIsInvalidProgram) {
  const std::vector<uint8_t>& mlp = Example("mlp");
  const fb::Graph* g = testing::program_of(mlp)->methods()->Get(0)->graph();
  struct Case {
    const char* name;
    std::vector<uint8_t> file;
  };
  std::vector<Case> cases;
  cases.push_back({"instruction args", DropField(mlp, g->instructions()->Get(0), fb::Instruction::VT_ARGS)});
  const fb::Tensor* planned = nullptr;
  for (const fb::Tensor* t : *g->values()) {
    if (t->storage_type() == fb::Storage::PlannedStorage) planned = t;
  }
  cases.push_back({"tensor storage", DropField(mlp, planned, fb::Tensor::VT_STORAGE)});
  const fb::KernelCall* with_attrs = nullptr;
  for (const fb::Instruction* ins : *g->instructions()) {
    const fb::KernelCall* call = ins->args_as_KernelCall();
    if (call != nullptr && call->attrs_type() != fb::Attributes::NONE) with_attrs = call;
  }
  ASSERT_NE(with_attrs, nullptr);
  cases.push_back({"kernel attrs", DropField(mlp, with_attrs, fb::KernelCall::VT_ATTRS)});
  const std::vector<uint8_t>& cnn = Example("cnn_null");
  const fb::Graph* cg = testing::program_of(cnn)->methods()->Get(0)->graph();
  for (const fb::Instruction* ins : *cg->instructions()) {
    if (ins->args_type() == fb::InstructionArgs::DelegateCall) {
      cases.push_back({"delegate call args", DropField(cnn, ins, fb::Instruction::VT_ARGS)});
      break;
    }
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Outcome o = LoadAndRun(c.file, rt_.context);
    EXPECT_EQ(o.code, Error::InvalidProgram) << to_string(o.code) << " '" << o.message << "'";
    EXPECT_FALSE(o.message.empty());
  }
}

}  // namespace
}  // namespace ember
