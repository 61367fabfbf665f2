// Errors after a good file has loaded (docs/DESIGN.md §8): wrong memory plans, wrong inputs, unknown
// methods, missing kernels and backends, aborts, state sized at load and misbehaving backends. Each
// gives its documented Error with a non-empty message, never a crash.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "exporter/passes/evaluate.h"
#include "runtime/backend/backend.h"
#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"
#include "tests/runtime/executor/error_path_util.h"

namespace ember {
namespace {

using testing::ErrorPathTest;
using testing::Example;
using testing::LoadAndRun;
using testing::MethodGraph;
using testing::Outcome;

using exporter::HostTensor;

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
  bool supports(const RuntimeContext&, const KernelKey&) const override { return true; }
  Result<MemoryRequirements> plan_memory(BackendLoadContext&, const GraphView&, Span<const CompileSpec>) const override {
    return MemoryRequirements();
  }
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
