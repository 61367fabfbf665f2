// Bad input is a test subject (DESIGN §8): corrupted, truncated, hostile and wrong-version files,
// wrong memory plans, wrong inputs, missing kernels and backends. Each gives its documented Error
// with a non-empty message, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "exporter/passes/evaluate.h"
#include "runtime/core/hash.h"
#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"
#include "tests/common/test_util.h"

namespace ember {
namespace {

using exporter::HostTensor;

struct Outcome {
  Error code = Error::Ok;
  std::string message;
  ErrorContext::Phase phase = ErrorContext::Phase::None;
};

// Loads bytes [0, size) of an aligned buffer and, when that works, loads every method with memory
// from its meta, sets every input at its max dims and executes twice. Returns the first error.
Outcome LoadAndRun(const uint8_t* data, size_t size, const RuntimeContext& runtime, const LoadOptions& options,
                   bool run = true) {
  Outcome out;
  ErrorContext ctx;
  BufferDataLoader loader(data, size);
  Result<Program> program = Program::load(loader, runtime, options, &ctx);
  auto fail = [&](Error code) {
    out.code = code;
    out.message = ctx.message;
    out.phase = ctx.phase;
    return out;
  };
  if (!program.is_ok()) return fail(program.error());
  if (!run) return out;
  for (size_t m = 0; m < program->method_count(); ++m) {
    const char* name = program->method_name(m);
    Result<MethodMeta> meta = program->method_meta(name, &ctx);
    if (!meta.is_ok()) return fail(meta.error());
    testing::MethodMemory memory(*meta);
    Result<Method> method = program->load_method(name, memory.plan(), &ctx);
    if (!method.is_ok()) return fail(method.error());
    for (size_t i = 0; i < method->input_count(); ++i) {
      Result<TensorMeta> im = meta->input(i);
      if (!im.is_ok()) return fail(im.error());
      const Status s = method->set_input_sizes(i, Span<const int64_t>(im->max_dims, im->rank), &ctx);
      if (!s.is_ok()) return fail(s.code());
      Result<TensorView> view = method->input(i);
      if (!view.is_ok()) return fail(view.error());
      if (view->dtype == ScalarType::F32) {
        float* p = view->data_as<float>();
        for (uint64_t k = 0; k < view->numel(); ++k) p[k] = 0.25f * static_cast<float>(k % 7) - 0.5f;
      }
    }
    for (int rep = 0; rep < 2; ++rep) {
      const Status s = method->execute(&ctx);
      if (!s.is_ok()) return fail(s.code());
    }
  }
  return out;
}

Outcome LoadAndRun(const std::vector<uint8_t>& file, const RuntimeContext& runtime, const LoadOptions& options = {},
                   bool run = true) {
  testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
  return LoadAndRun(bytes.data(), file.size(), runtime, options, run);
}

LoadOptions WithVerification(Verification v) {
  LoadOptions o;
  o.verification = v;
  return o;
}

const std::vector<uint8_t>& Example(const char* name) { return testing::example(name).program.bytes; }

// Collects mismatches of a long loop into one failure with the first few cases.
class Mismatches {
 public:
  void add(const std::string& what) {
    if (count_++ < 8) text_ += "\n  " + what;
  }
  void check(const char* label) const { EXPECT_EQ(count_, 0u) << label << ": " << count_ << " mismatches" << text_; }

 private:
  size_t count_ = 0;
  std::string text_;
};

std::string Describe(size_t at, const Outcome& o) {
  return "offset " + std::to_string(at) + ": " + to_string(o.code) + " '" + o.message + "'";
}

class ErrorPathTest : public ::testing::Test {
 protected:
  testing::QuietLogs quiet_;
  testing::Runtime rt_;
};

// ---- Sanity: the unmodified examples and an object-API round trip load and run. -----------------

TEST_F(ErrorPathTest, ExamplesLoadAndRunUnderEveryVerificationLevel) {
  for (const char* name : {"mlp", "cnn", "cnn_null"}) {
    for (Verification v : {Verification::Full, Verification::Structural, Verification::Trusted}) {
      const Outcome o = LoadAndRun(Example(name), rt_.context, WithVerification(v));
      EXPECT_EQ(o.code, Error::Ok) << name << " verification " << int(v) << ": " << o.message;
    }
  }
}

TEST_F(ErrorPathTest, ObjectApiRoundTripStillLoads) {
  for (const char* name : {"mlp", "cnn", "cnn_null"}) {
    const std::vector<uint8_t> file = testing::mutate_program(Example(name), [](fb::ProgramT&) {});
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, Error::Ok) << name << ": " << o.message;
  }
  std::vector<uint8_t> file = testing::mutate_program(Example("cnn_null"), [](fb::ProgramT& p) {
    testing::mutate_payload(*p.methods[0]->delegates[0], [](fb::GraphT&) {});
  });
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::Ok) << o.message;
}

// ---- Corruption: byte flips. ---------------------------------------------------------------------

TEST_F(ErrorPathTest, EveryHeaderByteFlipIsDetected) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    for (Verification v : {Verification::Full, Verification::Structural}) {
      Mismatches bad;
      for (size_t i = 0; i < kHeaderSize; ++i) {
        bytes.data()[i] ^= 0xFF;
        const Outcome o = LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(v), false);
        bytes.data()[i] ^= 0xFF;
        const Error expected = i < 4 ? Error::InvalidProgram : Error::IntegrityError;
        if (o.code != expected || o.message.empty()) bad.add(Describe(i, o));
      }
      bad.check(name);
    }
  }
}

TEST_F(ErrorPathTest, EveryFlatBufferByteFlipIsIntegrityError) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    const FileHeader h = testing::header_of(file);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    for (Verification v : {Verification::Full, Verification::Structural}) {
      Mismatches bad;
      for (size_t i = h.flatbuffer_offset; i < h.flatbuffer_offset + h.flatbuffer_size; ++i) {
        bytes.data()[i] ^= 0x5A;
        const Outcome o = LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(v), false);
        bytes.data()[i] ^= 0x5A;
        if (o.code != Error::IntegrityError || o.message.empty()) bad.add(Describe(i, o));
      }
      bad.check(name);
    }
  }
}

TEST_F(ErrorPathTest, SegmentFlipsAreIntegrityErrorsUnderFullVerification) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    const FileHeader h = testing::header_of(file);
    const fb::Program* p = testing::program_of(file);
    ASSERT_NE(p->segments(), nullptr);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    Mismatches bad;
    size_t flips = 0;
    for (const fb::Segment* seg : *p->segments()) {
      const uint64_t begin = h.segment_base + seg->offset();
      std::vector<uint64_t> points;
      for (uint64_t at = begin; at < begin + seg->size(); at += 4096) points.push_back(at);
      if (seg->size() > 0) points.push_back(begin + seg->size() - 1);
      for (uint64_t at : points) {
        bytes.data()[at] ^= 0x01;
        const Outcome full = LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(Verification::Full));
        // Structural skips segment hashes: the load may succeed and then runs on changed weights,
        // which must not crash.
        const Outcome structural =
            LoadAndRun(bytes.data(), file.size(), rt_.context, WithVerification(Verification::Structural));
        bytes.data()[at] ^= 0x01;
        ++flips;
        if (full.code != Error::IntegrityError || full.message.empty()) bad.add(Describe(at, full));
        if (structural.code != Error::Ok && structural.message.empty()) bad.add("structural " + Describe(at, structural));
      }
    }
    EXPECT_GT(flips, 2u) << name;
    bad.check(name);
  }
}

// ---- Truncation. -----------------------------------------------------------------------------------

TEST_F(ErrorPathTest, TruncationAtAnyOffsetFailsCleanly) {
  for (const char* name : {"mlp", "cnn_null"}) {
    const std::vector<uint8_t>& file = Example(name);
    testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
    std::vector<size_t> points;
    for (size_t at = 0; at < std::min<size_t>(file.size(), 65536); ++at) points.push_back(at);
    for (size_t at = 65536; at < file.size(); at += 509) points.push_back(at);
    points.push_back(file.size() - 1);
    Mismatches bad;
    for (Verification v : {Verification::Full, Verification::Structural}) {
      for (size_t at : points) {
        const Outcome o = LoadAndRun(bytes.data(), at, rt_.context, WithVerification(v), false);
        if (o.code == Error::Ok || o.message.empty()) bad.add(Describe(at, o));
      }
    }
    bad.check(name);
  }
}

// ---- Versions and features. -------------------------------------------------------------------------

TEST_F(ErrorPathTest, WrongMagicIsInvalidProgram) {
  std::vector<uint8_t> file = Example("mlp");
  std::memcpy(file.data(), "EMBQ", 4);  // the magic is checked before the header CRC
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram);
  EXPECT_NE(o.message.find("magic"), std::string::npos) << o.message;
  EXPECT_EQ(o.phase, ErrorContext::Phase::Header);
}

TEST_F(ErrorPathTest, WrongMajorVersionIsVersionMismatch) {
  for (uint16_t major : {uint16_t{0}, uint16_t{2}}) {
    std::vector<uint8_t> file = Example("mlp");
    FileHeader h = testing::header_of(file);
    h.major = major;
    testing::write_header(file, h);
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, Error::VersionMismatch) << o.message;
    EXPECT_FALSE(o.message.empty());
  }
}

TEST_F(ErrorPathTest, NewerMinRuntimeVersionIsVersionMismatch) {
  std::vector<uint8_t> file = Example("mlp");
  FileHeader h = testing::header_of(file);
  h.min_runtime_version = kRuntimeVersion + 1;
  testing::write_header(file, h);
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::VersionMismatch) << o.message;
  // A later minor of the same major with an old min_runtime_version loads.
  h.minor = kFormatMinor + 1;
  h.min_runtime_version = kRuntimeVersion;
  testing::write_header(file, h);
  EXPECT_EQ(LoadAndRun(file, rt_.context).code, Error::Ok);
}

TEST_F(ErrorPathTest, NextMajorFlatBufferIdentifierIsVersionMismatch) {
  std::vector<uint8_t> file = Example("mlp");
  const FileHeader h = testing::header_of(file);
  std::memcpy(file.data() + h.flatbuffer_offset + 4, "EM02", 4);
  testing::recompute_crcs(file);
  Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::VersionMismatch) << o.message;
  EXPECT_NE(o.message.find("EM02"), std::string::npos) << o.message;
  std::memcpy(file.data() + h.flatbuffer_offset + 4, "ABCD", 4);
  testing::recompute_crcs(file);
  o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram) << o.message;
}

TEST_F(ErrorPathTest, UnknownFeatureBitIsFeatureMissing) {
  for (uint64_t bit : {uint64_t{1} << 40, uint64_t{kFeatureFp8}, uint64_t{kFeaturePagedKv}}) {
    std::vector<uint8_t> file = Example("mlp");
    FileHeader h = testing::header_of(file);
    h.required_features |= bit;
    testing::write_header(file, h);
    const Outcome o = LoadAndRun(file, rt_.context);
    EXPECT_EQ(o.code, Error::FeatureMissing) << o.message;
    EXPECT_NE(o.message.find("bit " + std::to_string(__builtin_ctzll(bit))), std::string::npos) << o.message;
  }
}

TEST_F(ErrorPathTest, HeaderAndFlatBufferFeatureBitsMustAgree) {
  std::vector<uint8_t> file = Example("mlp");
  FileHeader h = testing::header_of(file);
  h.required_features |= kFeatureState;  // supported, but the FlatBuffer says otherwise
  testing::write_header(file, h);
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram) << o.message;
}

TEST_F(ErrorPathTest, FlatBufferSizeTooSmallFailsVerification) {
  std::vector<uint8_t> file = Example("mlp");
  FileHeader h = testing::header_of(file);
  h.flatbuffer_size /= 2;
  testing::write_header(file, h);
  testing::recompute_crcs(file);
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::InvalidProgram) << o.message;
  EXPECT_FALSE(o.message.empty());
}

// ---- Hostile FlatBuffers (CRCs correct, so they reach the verifier and the validator). -------------

fb::GraphT& MethodGraph(fb::ProgramT& p) { return *p.methods[0]->graph; }

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

// Quantized tensors are refused until quantized kernels bind by their layout.
TEST_F(ErrorPathTest, QuantizedTensorIsNotSupported) {
  const std::vector<uint8_t> file = testing::mutate_program(Example("mlp"), [](fb::ProgramT& p) {
    fb::GraphT& g = MethodGraph(p);
    fb::TensorT* w = FirstWithStorage(g, fb::Storage::ConstantStorage);
    w->quant = std::make_unique<fb::QuantInfoT>();
    w->quant->scale = 0;
    w->quant->scale_dtype = fb::ScalarType::F32;
    w->quant->scale_layout = fb::ScaleLayout::RowMajor;
    for (const auto& d : w->dims) w->quant->block.push_back(d.max());
  });
  const Outcome o = LoadAndRun(file, rt_.context);
  EXPECT_EQ(o.code, Error::NotSupported) << o.message;
  EXPECT_NE(o.message.find("quantized"), std::string::npos) << o.message;
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

// ---- Memory plans. ------------------------------------------------------------------------------------

class MemoryPlanTest : public ErrorPathTest {
 protected:
  void SetUp() override {
    for (const char* name : {"mlp", "cnn_null"}) {
      programs_.push_back(std::make_unique<testing::LoadedProgram>(Example(name), rt_.context));
      ASSERT_TRUE(programs_.back()->ok()) << programs_.back()->ctx().message;
    }
  }
  std::vector<std::unique_ptr<testing::LoadedProgram>> programs_;
};

TEST_F(MemoryPlanTest, ArenaOneByteShortIsOutOfMemory) {
  for (auto& lp : programs_) {
    Result<MethodMeta> meta = lp->program().method_meta("forward");
    ASSERT_TRUE(meta.is_ok());
    ASSERT_GT(meta->arena_count(), 0u);
    for (size_t a = 0; a < meta->arena_count(); ++a) {
      std::vector<size_t> shrink(meta->arena_count(), 0);
      shrink[a] = 1;
      testing::MethodMemory memory(*meta, SIZE_MAX, shrink);
      ErrorContext ctx;
      Result<Method> m = lp->program().load_method("forward", memory.plan(), &ctx);
      EXPECT_EQ(m.error(), Error::OutOfMemory) << "arena " << a;
      EXPECT_GT(std::strlen(ctx.message), 0u);
    }
  }
}

TEST_F(MemoryPlanTest, MethodAllocatorMustHoldExactlyMethodAllocatorBytes) {
  for (bool fallback : {false, true}) {
    testing::RuntimeOptions ro;
    ro.null_backend = !fallback;  // the delegate's bookkeeping differs between the two
    testing::Runtime rt(ro);
    for (const char* name : {"mlp", "cnn_null"}) {
      SCOPED_TRACE(std::string(name) + (fallback ? " fallback" : ""));
      testing::LoadedProgram lp(Example(name), rt.context);
      ASSERT_TRUE(lp.ok());
      Result<MethodMeta> meta = lp.program().method_meta("forward");
      ASSERT_TRUE(meta.is_ok());
      const size_t exact = meta->method_allocator_bytes();
      ASSERT_GT(exact, 0u);
      {
        testing::MethodMemory memory(*meta, exact - 1);
        ErrorContext ctx;
        Result<Method> m = lp.program().load_method("forward", memory.plan(), &ctx);
        EXPECT_EQ(m.error(), Error::OutOfMemory);
        EXPECT_GT(std::strlen(ctx.message), 0u);
      }
      {
        testing::MethodMemory memory(*meta, exact);
        ErrorContext ctx;
        Result<Method> m = lp.program().load_method("forward", memory.plan(), &ctx);
        ASSERT_TRUE(m.is_ok()) << ctx.message;
        EXPECT_EQ(memory.allocator().used(), exact) << "MethodMeta::method_allocator_bytes() is not exact";
        EXPECT_TRUE(m->execute(&ctx).is_ok()) << ctx.message;
      }
    }
  }
}

TEST_F(MemoryPlanTest, WrongArenaCountAndMisalignedArenaAreInvalidArgument) {
  testing::LoadedProgram& lp = *programs_[0];
  Result<MethodMeta> meta = lp.program().method_meta("forward");
  ASSERT_TRUE(meta.is_ok());
  testing::MethodMemory memory(*meta);
  {
    MemoryPlan fewer(memory.allocator(), Span<Span<uint8_t>>(memory.plan().arenas.data(), memory.plan().arenas.size() - 1),
                     memory.plan().scratch);
    ErrorContext ctx;
    EXPECT_EQ(lp.program().load_method("forward", fewer, &ctx).error(), Error::InvalidArgument);
    EXPECT_GT(std::strlen(ctx.message), 0u);
  }
  {
    std::vector<Span<uint8_t>> arenas(memory.plan().arenas.begin(), memory.plan().arenas.end());
    testing::AlignedBuffer big(static_cast<size_t>(meta->arena(0)->size) + 128, 64);
    arenas[0] = Span<uint8_t>(big.data() + 8, static_cast<size_t>(meta->arena(0)->size));
    MemoryPlan misaligned(memory.allocator(), Span<Span<uint8_t>>(arenas.data(), arenas.size()), memory.plan().scratch);
    ErrorContext ctx;
    EXPECT_EQ(lp.program().load_method("forward", misaligned, &ctx).error(), Error::InvalidArgument);
    EXPECT_GT(std::strlen(ctx.message), 0u);
  }
}

// ---- Run-time inputs. -------------------------------------------------------------------------------------

TEST_F(ErrorPathTest, WrongInputsAreInvalidArgumentAndLeaveTheMethodUsable) {
  const exporter::ExportResult& r = testing::example("mlp");
  testing::LoadedMethod lm(r.program.bytes, rt_.context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  Method& m = lm.method();
  ASSERT_EQ(m.input_count(), 1u);

  auto expect_invalid = [&](const char* what, const std::function<Status(ErrorContext*)>& call) {
    ErrorContext ctx;
    const Status s = call(&ctx);
    EXPECT_EQ(s.code(), Error::InvalidArgument) << what;
    EXPECT_GT(std::strlen(ctx.message), 0u) << what;
  };
  std::vector<float> data(8 * 64, 0.5f);
  HostTensor good = HostTensor::from_f32({2, 64}, testing::pattern(2 * 64));
  TensorView v = testing::view_of(good);

  TensorView wrong_dtype = v;
  wrong_dtype.dtype = ScalarType::F16;
  expect_invalid("dtype f16", [&](ErrorContext* c) { return m.set_input(0, wrong_dtype, c); });
  wrong_dtype.dtype = ScalarType::I32;
  expect_invalid("dtype i32", [&](ErrorContext* c) { return m.set_input(0, wrong_dtype, c); });
  TensorView wrong_inner = v;
  wrong_inner.dims[1] = 63;
  expect_invalid("static dim 63", [&](ErrorContext* c) { return m.set_input(0, wrong_inner, c); });
  TensorView wrong_rank = v;
  wrong_rank.rank = 3;
  wrong_rank.dims[2] = 1;
  expect_invalid("rank 3", [&](ErrorContext* c) { return m.set_input(0, wrong_rank, c); });
  for (int64_t batch : {int64_t{0}, int64_t{9}, int64_t{-1}, int64_t{1} << 40}) {
    const int64_t dims[2] = {batch, 64};
    expect_invalid("batch out of bounds",
                   [&](ErrorContext* c) { return m.set_input_sizes(0, Span<const int64_t>(dims, 2), c); });
  }
  const int64_t rank1[1] = {64};
  expect_invalid("rank 1 sizes", [&](ErrorContext* c) { return m.set_input_sizes(0, Span<const int64_t>(rank1, 1), c); });
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_invalid("rank 9 sizes", [&](ErrorContext* c) { return m.set_input_sizes(0, Span<const int64_t>(nine, 9), c); });
  expect_invalid("input index", [&](ErrorContext* c) { return m.set_input(1, v, c); });
  const int64_t ok_dims[2] = {2, 64};
  expect_invalid("input index sizes",
                 [&](ErrorContext* c) { return m.set_input_sizes(7, Span<const int64_t>(ok_dims, 2), c); });
  EXPECT_EQ(m.input(1).error(), Error::InvalidArgument);
  EXPECT_EQ(m.output(1), nullptr);

  // Still usable, and correct.
  const std::vector<HostTensor> expected = exporter::evaluate(r.graph, {good});
  const std::vector<HostTensor> actual = testing::run_method(m, {good});
  ASSERT_EQ(actual.size(), 1u);
  testing::ExpectAllClose(actual[0], expected[0]);
}

TEST_F(ErrorPathTest, UnknownMethodIsNotFound) {
  testing::LoadedProgram lp(Example("mlp"), rt_.context);
  ASSERT_TRUE(lp.ok());
  ErrorContext ctx;
  EXPECT_EQ(lp.program().method_meta("backward", &ctx).error(), Error::NotFound);
  EXPECT_NE(std::strstr(ctx.message, "backward"), nullptr) << ctx.message;
  Result<MethodMeta> meta = lp.program().method_meta("forward");
  ASSERT_TRUE(meta.is_ok());
  testing::MethodMemory memory(*meta);
  ctx.clear();
  EXPECT_EQ(lp.program().load_method("backward", memory.plan(), &ctx).error(), Error::NotFound);
  EXPECT_NE(std::strstr(ctx.message, "backward"), nullptr) << ctx.message;
  EXPECT_EQ(lp.program().method_count(), 1u);
  EXPECT_STREQ(lp.program().method_name(0), "forward");
  EXPECT_STREQ(lp.program().method_name(1), "");
}

// ---- Kernels and backends. ------------------------------------------------------------------------------------

TEST_F(ErrorPathTest, MissingKernelsAreAllReportedAtOnce) {
  testing::RuntimeOptions ro;
  ro.kernels = false;
  testing::Runtime empty(ro);
  for (const char* name : {"mlp", "cnn"}) {
    SCOPED_TRACE(name);
    const exporter::ExportResult& r = testing::example(name);
    testing::LoadedMethod lm(r.program.bytes, empty.context);
    ASSERT_FALSE(lm.ok());
    EXPECT_EQ(lm.error(), Error::KernelMissing);
    const std::string message = lm.ctx().message;
    RecordProperty(std::string(name) + "_message", message);
    // Every kernel instruction is counted, and the distinct ops are named (as far as the fixed-size
    // message reaches).
    size_t kernel_steps = 0;
    for (const auto& step : r.partition.steps) kernel_steps += step.kind == exporter::Step::Kind::Kernel;
    EXPECT_NE(message.find(std::to_string(kernel_steps) + " instruction"), std::string::npos) << message;
    const std::string first_op = to_string(r.graph.nodes[0].op);
    EXPECT_NE(message.find(first_op), std::string::npos) << message;
    if (message.size() < ErrorContext::kMessageSize - 1) {
      for (const exporter::Node& n : r.graph.nodes) {
        EXPECT_NE(message.find(to_string(n.op)), std::string::npos) << to_string(n.op) << " not in: " << message;
      }
    }
  }
}

TEST_F(ErrorPathTest, DelegateToAbsentBackendFailsOrFallsBack) {
  const exporter::ExportResult& r = testing::example("cnn_null");
  testing::RuntimeOptions ro;
  ro.null_backend = false;
  testing::Runtime no_null(ro);
  LoadOptions fail;
  fail.fallback = Fallback::Fail;
  {
    testing::LoadedMethod lm(r.program.bytes, no_null.context, fail);
    ASSERT_FALSE(lm.ok());
    EXPECT_EQ(lm.error(), Error::BackendUnavailable);
    EXPECT_NE(std::strstr(lm.ctx().message, "null"), nullptr) << lm.ctx().message;
  }
  {
    // Registered but not in the allow-list: same.
    const char* const allowed[] = {"vulkan"};
    LoadOptions o = fail;
    o.backends = Span<const char* const>(allowed, 1);
    testing::LoadedMethod lm(r.program.bytes, rt_.context, o);
    EXPECT_EQ(lm.error(), Error::BackendUnavailable);
  }
  const HostTensor in = HostTensor::from_f32({1, 3, 32, 32}, testing::pattern(3 * 32 * 32));
  const std::vector<HostTensor> expected = exporter::evaluate(r.graph, {in});
  for (bool registered : {false, true}) {
    SCOPED_TRACE(registered ? "null registered" : "portable fallback");
    testing::LoadedMethod lm(r.program.bytes, registered ? rt_.context : no_null.context);
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    bool saw_delegate = false;
    for (size_t i = 0; i < lm.method().instruction_count(); ++i) {
      const std::string backend = lm.method().instruction_backend(i);
      if (backend.find("null") != std::string::npos) {
        saw_delegate = true;
        EXPECT_EQ(backend, registered ? "null" : "portable (fallback for null)");
      }
    }
    EXPECT_TRUE(saw_delegate);
    const std::vector<HostTensor> actual = testing::run_method(lm.method(), {in});
    ASSERT_EQ(actual.size(), 1u);
    testing::ExpectAllClose(actual[0], expected[0]);
  }
}

TEST_F(ErrorPathTest, RequestAbortCancelsOnceAndTheNextExecuteWorks) {
  for (const char* name : {"mlp", "cnn_null"}) {
    SCOPED_TRACE(name);
    const exporter::ExportResult& r = testing::example(name);
    testing::LoadedMethod lm(r.program.bytes, rt_.context);
    ASSERT_TRUE(lm.ok());
    const exporter::Value& iv = r.graph.values[static_cast<size_t>(r.graph.inputs[0].value)];
    std::vector<int64_t> dims;
    size_t n = 1;
    for (const exporter::Dim& d : iv.dims) {
      dims.push_back(d.sym ? 2 : d.max);
      n *= static_cast<size_t>(dims.back());
    }
    const HostTensor in = HostTensor::from_f32(dims, testing::pattern(n));
    ErrorContext ctx;
    ASSERT_TRUE(lm.method().set_input(0, testing::view_of(in), &ctx).is_ok());
    lm.method().request_abort();
    EXPECT_EQ(lm.method().execute(&ctx).code(), Error::Cancelled);
    EXPECT_GT(std::strlen(ctx.message), 0u);
    const std::vector<HostTensor> expected = exporter::evaluate(r.graph, {in});
    const std::vector<HostTensor> actual = testing::run_method(lm.method(), {in});
    ASSERT_EQ(actual.size(), 1u);
    testing::ExpectAllClose(actual[0], expected[0]);
  }
}

TEST_F(ErrorPathTest, AbortFromAnotherThreadStopsOrCompletes) {
  const exporter::ExportResult& r = testing::example("mlp");
  testing::LoadedMethod lm(r.program.bytes, rt_.context);
  ASSERT_TRUE(lm.ok());
  int cancelled = 0;
  for (int i = 0; i < 200; ++i) {
    std::thread t([&] { lm.method().request_abort(); });
    ErrorContext ctx;
    const Status s = lm.method().execute(&ctx);
    t.join();
    ASSERT_TRUE(s.is_ok() || s.code() == Error::Cancelled) << to_string(s.code());
    cancelled += s.code() == Error::Cancelled;
    // An abort that arrived after the call finished applies to the next call.
  }
  (void)cancelled;
}

// ---- Review fixes: state sized at load, compile specs, backend outputs. -------------------------------------

// Declares program symbol "n" (max = last dim of `dims`) and state "kv" (F32, `dims` with the last dim
// symbolic), adds a method value bound to it and returns that value's index.
uint32_t AddStateValue(fb::ProgramT& p, const std::vector<fb::Dim>& dims) {
  auto sym = std::make_unique<fb::SymbolT>();
  sym->name = "n";
  sym->min = 1;
  sym->max = dims.back().max();
  p.symbols.push_back(std::move(sym));
  auto decl = std::make_unique<fb::StateDeclT>();
  decl->name = "kv";
  decl->dtype = fb::ScalarType::F32;
  decl->dims = dims;
  decl->dims.back() = fb::Dim(dims.back().max(), static_cast<uint16_t>(p.symbols.size()));
  p.states.push_back(std::move(decl));
  p.required_features |= kFeatureState;
  fb::GraphT& g = MethodGraph(p);
  auto t = std::make_unique<fb::TensorT>();
  t->dtype = fb::ScalarType::F32;
  t->dim_order = fb::DimOrder::Contiguous;
  uint64_t numel = 1;
  for (const fb::Dim& d : dims) numel *= static_cast<uint64_t>(d.max());
  t->dims = dims;
  t->nbytes = numel * 4;
  fb::StateStorageT storage;
  storage.name = "kv";
  t->storage.Set(storage);
  g.values.push_back(std::move(t));
  if (!g.lifetimes.empty()) g.lifetimes.emplace_back(0, 0);
  return static_cast<uint32_t>(g.values.size() - 1);
}

std::vector<uint8_t> WithStateFeature(std::vector<uint8_t> file) {
  FileHeader h = testing::header_of(file);
  h.required_features |= kFeatureState;
  testing::write_header(file, h);
  return file;
}

TEST_F(ErrorPathTest, MoveIntoStateSizedAtLoadIsInvalidArgument) {
  // A Move whose destination is state with a load-time symbol below its max: the validator proves
  // equal max sizes only, so the copy overflowed the smaller state buffer (heap overflow).
  const std::vector<uint8_t> file = WithStateFeature(testing::mutate_program(Example("mlp"), [](fb::ProgramT& p) {
    const uint32_t kv = AddStateValue(p, {fb::Dim(16, 0)});
    fb::GraphT& g = MethodGraph(p);
    const fb::TensorT* planned = nullptr;
    for (const auto& v : g.values) {
      if (v->storage.type == fb::Storage::PlannedStorage && v->nbytes >= 64) planned = v.get();
    }
    ASSERT_NE(planned, nullptr);
    auto src = std::make_unique<fb::TensorT>();
    src->dtype = fb::ScalarType::F32;
    src->dim_order = fb::DimOrder::Contiguous;
    src->dims = {fb::Dim(16, 0)};
    src->nbytes = 64;
    fb::PlannedStorageT storage = *planned->storage.AsPlannedStorage();
    src->storage.Set(storage);
    g.values.push_back(std::move(src));
    if (!g.lifetimes.empty()) g.lifetimes.emplace_back(0, 0);
    fb::MoveT move;
    move.src = static_cast<uint32_t>(g.values.size() - 1);
    move.dst = kv;
    auto ins = std::make_unique<fb::InstructionT>();
    ins->args.Set(move);
    g.instructions.push_back(std::move(ins));
  }));
  EXPECT_EQ(LoadAndRun(file, rt_.context).code, Error::Ok);  // n at its max: fits
  const SymbolValue small{"n", 2};
  LoadOptions options;
  options.symbols = Span<const SymbolValue>(&small, 1);
  const Outcome o = LoadAndRun(file, rt_.context, options);
  EXPECT_EQ(o.code, Error::InvalidArgument) << o.message;
  EXPECT_NE(o.message.find("move"), std::string::npos) << o.message;
  EXPECT_EQ(o.phase, ErrorContext::Phase::Execute);
}

TEST_F(ErrorPathTest, StaticKernelOutputIntoStateSizedAtLoadIsRejectedAtLoad) {
  // cnn is static: run() never re-checks output sizes, so a kernel writing state whose buffer was
  // sized with a smaller load-time symbol must be rejected when the method is bound.
  const std::vector<uint8_t> file = WithStateFeature(testing::mutate_program(Example("cnn"), [](fb::ProgramT& p) {
    fb::GraphT& g = MethodGraph(p);
    uint32_t x = 0;
    for (uint32_t v = 0; v < g.values.size(); ++v) {
      const fb::TensorT& t = *g.values[v];
      if (t.storage.type == fb::Storage::PlannedStorage && t.dtype == fb::ScalarType::F32 && !t.dims.empty() &&
          t.dims.back().max() >= 4) {
        x = v;
      }
    }
    const std::vector<fb::Dim> dims = g.values[x]->dims;
    const uint32_t kv = AddStateValue(p, dims);
    fb::KernelCallT relu;
    relu.op = fb::OpCode::Relu;
    relu.inputs = {static_cast<int32_t>(x)};
    relu.outputs = {kv};
    auto ins = std::make_unique<fb::InstructionT>();
    ins->args.Set(relu);
    MethodGraph(p).instructions.push_back(std::move(ins));
  }));
  EXPECT_EQ(LoadAndRun(file, rt_.context).code, Error::Ok);  // n at its max: fits
  const SymbolValue small{"n", 2};
  LoadOptions options;
  options.symbols = Span<const SymbolValue>(&small, 1);
  const Outcome o = LoadAndRun(file, rt_.context, options);
  EXPECT_EQ(o.code, Error::InvalidArgument) << o.message;
  EXPECT_NE(o.message.find("storage holds"), std::string::npos) << o.message;
  EXPECT_EQ(o.phase, ErrorContext::Phase::Load);
}

TEST_F(ErrorPathTest, CompileSpecsInATightMisalignedAllocatorAreOutOfMemory) {
  // The allocator pre-check counts bytes, not alignment padding; the compile-spec array was then
  // written through a null pointer.
  const std::vector<uint8_t> file = testing::mutate_program(Example("cnn_null"), [](fb::ProgramT& p) {
    auto spec = std::make_unique<fb::CompileSpecT>();
    spec->key = "k";
    p.methods[0]->delegates[0]->compile_specs.push_back(std::move(spec));
  });
  testing::LoadedProgram lp(file, rt_.context);
  ASSERT_TRUE(lp.ok()) << lp.ctx().message;
  Result<MethodMeta> meta = lp.program().method_meta("forward");
  ASSERT_TRUE(meta.is_ok());
  testing::MethodMemory memory(*meta);
  const size_t bytes = meta->method_allocator_bytes();
  testing::AlignedBuffer buffer(bytes + 64, 64);
  BumpAllocator misaligned(Span<uint8_t>(buffer.data() + 8, bytes));  // first allocation pads 8 bytes
  MemoryPlan plan(misaligned, memory.plan().arenas, memory.plan().scratch);
  ErrorContext ctx;
  Result<Method> m = lp.program().load_method("forward", plan, &ctx);
  EXPECT_EQ(m.error(), Error::OutOfMemory) << ctx.message;
  EXPECT_GT(std::strlen(ctx.message), 0u);
}

// A backend that runs nothing and returns a wrong output shape.
class BadShapeBackend final : public Backend {
 public:
  explicit BadShapeBackend(bool bad_rank) : bad_rank_(bad_rank) {}
  bool is_available(const RuntimeContext&) const override { return true; }
  Result<DelegateHandle*> init(BackendInitContext&, const GraphView&, Span<const CompileSpec>) const override {
    static int token = 0;
    return reinterpret_cast<DelegateHandle*>(&token);
  }
  Status execute(BackendExecuteContext&, DelegateHandle*, Span<const TensorView>,
                 Span<TensorView> outputs) const override {
    if (bad_rank_) {
      outputs[0].rank = kMaxRank + 1;  // would write dims[8] of the executor's value table
    } else {
      outputs[0].dims[0] += 1;  // past the declared max: later kernels would read past the arena
    }
    return Status::ok();
  }
  MemoryRequirements memory_requirements(const DelegateHandle*) const override { return {}; }
  void destroy(DelegateHandle*) const noexcept override {}

 private:
  bool bad_rank_;
};

TEST_F(ErrorPathTest, BackendOutputShapeBeyondTheDeclaredIsBackendFailed) {
  for (bool bad_rank : {true, false}) {
    SCOPED_TRACE(bad_rank ? "rank" : "dims");
    BadShapeBackend backend(bad_rank);
    BackendRegistry registry;
    ASSERT_TRUE(registry.add("null", backend).is_ok());
    RuntimeContext runtime = rt_.context;
    runtime.backends = &registry;
    const Outcome o = LoadAndRun(Example("cnn_null"), runtime);
    EXPECT_EQ(o.code, Error::BackendFailed) << o.message;
    EXPECT_NE(o.message.find("returned output 0"), std::string::npos) << o.message;
  }
}

}  // namespace
}  // namespace ember
