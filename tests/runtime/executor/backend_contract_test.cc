// The backend contract (runtime/backend/backend.h, docs/DESIGN.md §3, §7) proven on the sim backend, a
// simulated device whose memory the host cannot read, against the portable kernels:
//  - the CNN example and the paged-attention step run on sim bitwise as on the portable kernels,
//    whole (LoadOptions::backends retargets a delegate-free Method) and as GRAPH delegates, the KV
//    cache state then owned by sim (owner, domain, no host data);
//  - retargeting at load: a sim delegate runs on the portable kernels when sim is not registered
//    (Fallback::Portable) or fails with BackendUnavailable naming why (Fallback::Fail); a priority
//    list moves delegates to another backend that supports them, or to the portable kernels;
//  - MethodMeta::delegate(i).memory (plan_memory, before init) equals Method::delegate_memory(i)
//    (what init took) for every delegate and whole method;
//  - host program state comes from the app's DeviceAllocator and goes back to it at ~Program;
//  - sim's state is not host memory: reading it from the host faults (a death test);
//  - one state claimed by sim and by host code fails Program::load naming both claimants;
//  - a GRAPH payload whose state differs from its declaration, or names undeclared state, is
//    InvalidProgram naming the state.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/sim/register.h"
#include "runtime/core/device_allocator.h"
#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"
#include "tests/common/state_allocator.h"
#include "tests/common/test_util.h"
#include "tests/runtime/executor/paged_attention_steps.h"

namespace ember {
namespace {

using exporter::HostTensor;
using testing::f32_tensor;
using testing::kBlockSize;
using testing::kD;
using testing::kHkv;
using testing::kNumBlocks;
using testing::run_attention_steps;
using testing::StateAllocator;

constexpr uint32_t kWhole = DelegateMeta::kWholeMethod;

std::string str(const char* s) { return s != nullptr ? s : "(null)"; }

// Runtimes: kernels with the null backend, plus sim when asked.
std::unique_ptr<testing::Runtime> MakeRuntime(bool sim, bool null = true) {
  testing::RuntimeOptions o;
  o.sim_backend = sim;
  o.null_backend = null;
  return std::make_unique<testing::Runtime>(o);
}

LoadOptions Priority(const std::vector<const char*>& names, Fallback fallback = Fallback::Portable) {
  static std::vector<const char*> keep;  // LoadOptions borrows; Program::load copies
  keep = names;
  LoadOptions o;
  o.backends = Span<const char* const>(keep.data(), keep.size());
  o.fallback = fallback;
  return o;
}

// ---- The CNN example. --------------------------------------------------------------------------------

HostTensor Image() { return f32_tensor({1, 3, 32, 32}, testing::pattern(3 * 32 * 32, 5)); }

std::vector<HostTensor> RunCnn(const std::vector<uint8_t>& file, const RuntimeContext& rt, const LoadOptions& o,
                               std::vector<std::string>* runs_on = nullptr) {
  testing::LoadedMethod lm(file, rt, o);
  EXPECT_TRUE(lm.ok()) << to_string(lm.error()) << ": " << lm.ctx().message;
  if (!lm.ok()) return {};
  if (runs_on != nullptr) {
    const MethodMeta meta = lm.method().meta();
    runs_on->push_back(meta.delegate(kWhole)->runs_on);
    for (uint32_t d = 0; d < meta.delegate_count(); ++d) runs_on->push_back(meta.delegate(d)->runs_on);
  }
  std::vector<HostTensor> out = testing::run_method(lm.method(), {Image()});
  std::vector<HostTensor> again = testing::run_method(lm.method(), {Image()});  // a second run: same bytes
  EXPECT_EQ(out.size(), 1u);
  if (out.size() == 1 && again.size() == 1) testing::ExpectBitwiseEqual(again[0], out[0]);
  return out;
}

TEST(BackendContractTest, CnnOnSimIsBitwiseThePortableRun) {
  const std::vector<uint8_t>& cnn = testing::example("cnn").program.bytes;
  const std::vector<uint8_t>& cnn_sim = testing::example("cnn_sim").program.bytes;
  // cnn_sim: conv1 | relu pool | dw2 pw2 | relu gap flatten | fc | softmax.
  ASSERT_EQ(testing::example("cnn_sim").partition.delegates.size(), 3u);
  auto plain = MakeRuntime(false), with_sim = MakeRuntime(true);
  const std::vector<HostTensor> portable = RunCnn(cnn, plain->context, {});
  ASSERT_EQ(portable.size(), 1u);

  std::vector<std::string> runs_on;
  const std::vector<HostTensor> whole = RunCnn(cnn, with_sim->context, Priority({"sim"}), &runs_on);
  ASSERT_EQ(whole.size(), 1u);
  testing::ExpectBitwiseEqual(whole[0], portable[0]);
  EXPECT_EQ(runs_on, (std::vector<std::string>{"sim"}));

  runs_on.clear();
  const std::vector<HostTensor> delegated = RunCnn(cnn_sim, with_sim->context, {}, &runs_on);
  ASSERT_EQ(delegated.size(), 1u);
  testing::ExpectBitwiseEqual(delegated[0], portable[0]);
  EXPECT_EQ(runs_on, (std::vector<std::string>{"portable", "sim", "sim", "sim"}));

  // What runs each instruction, and why.
  testing::LoadedMethod lm(cnn, with_sim->context, Priority({"sim"}));
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  for (size_t i = 0; i < lm.method().instruction_count(); ++i) {
    EXPECT_EQ(str(lm.method().instruction_backend(i)), "sim (whole method)") << i;
  }
  Result<DelegateMeta> body = lm.method().meta().delegate(kWhole);
  ASSERT_TRUE(body.is_ok());
  EXPECT_EQ(str(body->exported_for), "");
  EXPECT_NE(str(body->reason).find("first listed backend that runs all"), std::string::npos) << body->reason;
  EXPECT_EQ(body->instruction_count, lm.method().instruction_count());
}

// ---- The paged-attention step: the KV cache as program state. ----------------------------------------

// `o` with num_blocks = kNumBlocks: the KV cache the step script of paged_attention_steps.h needs.
LoadOptions WithBlocks(LoadOptions o) {
  static const SymbolValue blocks[] = {{"num_blocks", kNumBlocks}};
  o.symbols = Span<const SymbolValue>(blocks, 1);
  return o;
}

void ExpectSimOwnsTheCache(const Program& program) {
  for (const char* name : {"kv.0.k", "kv.0.v"}) {
    SCOPED_TRACE(name);
    const Program::State* state = program.find_state(name);
    ASSERT_NE(state, nullptr);
    EXPECT_EQ(str(state->owner), "sim");
    EXPECT_EQ(state->domain, MemoryDomain::Device);
    EXPECT_EQ(state->data, nullptr);
    EXPECT_EQ(program.state_data(name), nullptr);
    EXPECT_NE(state->buffer, nullptr);
    EXPECT_NE(state->backend, nullptr);
    EXPECT_EQ(state->nbytes, uint64_t(kNumBlocks * kBlockSize * kHkv * kD * 4));
    EXPECT_GE(state->memory.device_bytes, state->nbytes);  // whole pages
    ASSERT_EQ(state->memory.parts().size(), 2u);  // by purpose: its host record, its device bytes
    EXPECT_EQ(str(state->memory.parts()[0].purpose), "state record");
    EXPECT_EQ(state->memory.parts()[0].domain, MemoryDomain::Host);
    EXPECT_EQ(state->memory.parts()[0].bytes, state->memory.host_bytes);
    EXPECT_EQ(str(state->memory.parts()[1].purpose), "state");
    EXPECT_EQ(state->memory.parts()[1].domain, MemoryDomain::Device);
    EXPECT_EQ(state->memory.parts()[1].bytes, state->memory.device_bytes);
    EXPECT_NE(backends::sim::device_address(state->buffer), nullptr);
  }
}

TEST(BackendContractTest, PagedAttentionWithItsCacheOnSimIsBitwiseThePortableRun) {
  const std::vector<uint8_t>& portable_file = testing::example("paged_attention").program.bytes;
  const std::vector<uint8_t>& sim_file = testing::example("paged_attention_sim").program.bytes;
  auto plain = MakeRuntime(false), with_sim = MakeRuntime(true);

  testing::LoadedMethod portable(portable_file, plain->context, WithBlocks({}), "step");
  ASSERT_TRUE(portable.ok()) << portable.ctx().message;
  const Program::State* host_state = portable.program().find_state("kv.0.k");
  ASSERT_NE(host_state, nullptr);
  EXPECT_EQ(str(host_state->owner), "program");
  EXPECT_EQ(host_state->domain, MemoryDomain::Host);
  EXPECT_NE(host_state->data, nullptr);
  const std::vector<HostTensor> expected = run_attention_steps(portable.method());
  ASSERT_EQ(expected.size(), 3u);
  bool cache_written = false;
  for (uint64_t i = 0; i < host_state->nbytes; ++i) cache_written = cache_written || host_state->data[i] != 0;
  EXPECT_TRUE(cache_written);

  // (a) The portable file, its delegate-free Method taken whole by sim.
  testing::LoadedMethod whole(portable_file, with_sim->context, WithBlocks(Priority({"sim"})), "step");
  ASSERT_TRUE(whole.ok()) << whole.ctx().message;
  ExpectSimOwnsTheCache(whole.program());
  EXPECT_EQ(whole.method().meta().delegate_count(), 0u);
  EXPECT_EQ(str(whole.method().meta().delegate(kWhole)->runs_on), "sim");
  // (b) Exported for sim: paged_attention in a GRAPH delegate that holds the cache.
  testing::LoadedMethod delegated(sim_file, with_sim->context, WithBlocks({}), "step");
  ASSERT_TRUE(delegated.ok()) << delegated.ctx().message;
  ExpectSimOwnsTheCache(delegated.program());
  const MethodMeta meta = delegated.method().meta();
  ASSERT_EQ(meta.delegate_count(), 1u);
  EXPECT_EQ(str(meta.delegate_backend(0)), "sim");
  EXPECT_EQ(str(meta.delegate(0)->runs_on), "sim");
  EXPECT_EQ(str(meta.delegate(0)->exported_for), "sim");
  EXPECT_EQ(str(meta.delegate(0)->reason), "exported for it");
  EXPECT_EQ(str(meta.delegate(kWhole)->runs_on), "portable");

  for (testing::LoadedMethod* lm : {&whole, &delegated}) {
    SCOPED_TRACE(lm == &whole ? "whole method on sim" : "GRAPH delegate on sim");
    const std::vector<HostTensor> got = run_attention_steps(lm->method());
    ASSERT_EQ(got.size(), expected.size());
    for (size_t s = 0; s < got.size(); ++s) {
      SCOPED_TRACE("step " + std::to_string(s));
      testing::ExpectBitwiseEqual(got[s], expected[s]);
    }
  }
}

// ---- Reported bytes = allocated bytes. ----------------------------------------------------------------

TEST(BackendContractTest, PlannedMemoryIsWhatInitTook) {
  auto rt = MakeRuntime(true);
  {
    SCOPED_TRACE("cnn, whole on sim");
    testing::LoadedMethod lm(testing::example("cnn").program.bytes, rt->context, Priority({"sim"}));
    testing::ExpectPlannedMemoryIsTaken(lm, "sim", 1);
  }
  {
    SCOPED_TRACE("cnn_sim, three delegates");
    testing::LoadedMethod lm(testing::example("cnn_sim").program.bytes, rt->context);
    testing::ExpectPlannedMemoryIsTaken(lm, "sim", 3);
  }
  {
    SCOPED_TRACE("cnn_null, null delegates");
    testing::LoadedMethod lm(testing::example("cnn_null").program.bytes, rt->context);
    testing::ExpectPlannedMemoryIsTaken(lm, "null", testing::example("cnn_null").partition.delegates.size());
  }
  {
    SCOPED_TRACE("cnn, portable");
    testing::LoadedMethod lm(testing::example("cnn").program.bytes, rt->context);
    testing::ExpectPlannedMemoryIsTaken(lm, "sim", 0);
  }
  {
    SCOPED_TRACE("paged attention, whole on sim");
    testing::LoadedMethod lm(testing::example("paged_attention").program.bytes, rt->context,
                             WithBlocks(Priority({"sim"})), "step");
    testing::ExpectPlannedMemoryIsTaken(lm, "sim", 1);
  }
  {
    SCOPED_TRACE("paged attention, sim delegate");
    testing::LoadedMethod lm(testing::example("paged_attention_sim").program.bytes, rt->context, WithBlocks({}),
                             "step");
    testing::ExpectPlannedMemoryIsTaken(lm, "sim", 1);
  }
}

// ---- Retargeting. ------------------------------------------------------------------------------------------

TEST(BackendContractTest, DelegatesAreRetargetedAtLoad) {
  const std::vector<uint8_t>& cnn = testing::example("cnn").program.bytes;
  const std::vector<uint8_t>& cnn_sim = testing::example("cnn_sim").program.bytes;
  auto plain = MakeRuntime(false), with_sim = MakeRuntime(true);
  const std::vector<HostTensor> expected = RunCnn(cnn, plain->context, {});
  ASSERT_EQ(expected.size(), 1u);
  {
    SCOPED_TRACE("exported for sim, sim not registered: the portable kernels");
    testing::LoadedMethod lm(cnn_sim, plain->context);
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    for (uint32_t d = 0; d < 3; ++d) {
      const DelegateMeta meta = lm.method().meta().delegate(d).value();
      EXPECT_EQ(str(meta.runs_on), "portable");
      EXPECT_EQ(str(meta.exported_for), "sim");
      EXPECT_NE(str(meta.reason).find("sim is not registered"), std::string::npos) << meta.reason;
      EXPECT_NE(str(meta.reason).find("portable kernels (fallback)"), std::string::npos) << meta.reason;
      EXPECT_TRUE(meta.memory == MemoryRequirements());
    }
    const std::vector<HostTensor> got = testing::run_method(lm.method(), {Image()});
    ASSERT_EQ(got.size(), 1u);
    testing::ExpectBitwiseEqual(got[0], expected[0]);
  }
  {
    SCOPED_TRACE("exported for sim, sim not registered, Fallback::Fail");
    testing::LoadedMethod lm(cnn_sim, plain->context, Priority({}, Fallback::Fail));
    EXPECT_EQ(lm.error(), Error::BackendUnavailable);
    EXPECT_NE(std::string(lm.ctx().message).find("delegate 0 (exported for 'sim') has no backend"), std::string::npos)
        << lm.ctx().message;
    EXPECT_NE(std::string(lm.ctx().message).find("sim is not registered"), std::string::npos) << lm.ctx().message;
  }
  {
    SCOPED_TRACE("exported for sim, priority {null}: conv2d moves to null, linear to the portable kernels");
    testing::LoadedMethod lm(cnn_sim, with_sim->context, Priority({"null"}));
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    const MethodMeta meta = lm.method().meta();
    for (uint32_t d : {0u, 1u}) {
      EXPECT_EQ(str(meta.delegate(d)->runs_on), "null") << d;
      EXPECT_NE(str(meta.delegate(d)->reason).find("retargeted from sim"), std::string::npos) << meta.delegate(d)->reason;
    }
    EXPECT_EQ(str(meta.delegate(2)->runs_on), "portable");
    EXPECT_NE(str(meta.delegate(2)->reason).find("null lacks linear"), std::string::npos) << meta.delegate(2)->reason;
    const std::vector<HostTensor> got = testing::run_method(lm.method(), {Image()});
    ASSERT_EQ(got.size(), 1u);
    testing::ExpectBitwiseEqual(got[0], expected[0]);
    testing::LoadedMethod strict(cnn_sim, with_sim->context, Priority({"null"}, Fallback::Fail));
    EXPECT_EQ(strict.error(), Error::BackendUnavailable);
    EXPECT_NE(std::string(strict.ctx().message).find("delegate 2 (exported for 'sim') has no backend: null lacks linear"),
              std::string::npos)
        << strict.ctx().message;
  }
  {
    SCOPED_TRACE("portable file, priority {null, sim}: null cannot run it all, sim takes it whole");
    std::vector<std::string> runs_on;
    const std::vector<HostTensor> got = RunCnn(cnn, with_sim->context, Priority({"null", "sim"}), &runs_on);
    ASSERT_EQ(got.size(), 1u);
    testing::ExpectBitwiseEqual(got[0], expected[0]);
    EXPECT_EQ(runs_on, (std::vector<std::string>{"sim"}));
    testing::LoadedMethod lm(cnn, with_sim->context, Priority({"null"}));
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    const DelegateMeta body = lm.method().meta().delegate(kWhole).value();
    EXPECT_EQ(str(body.runs_on), "portable");
    EXPECT_NE(str(body.reason).find("null lacks"), std::string::npos) << body.reason;
    EXPECT_NE(str(body.reason).find("portable kernels"), std::string::npos) << body.reason;
  }
  {
    SCOPED_TRACE("a priority list naming only unregistered backends: exported choices do not apply");
    testing::LoadedMethod lm(cnn_sim, with_sim->context, Priority({"vulkan"}));
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    EXPECT_EQ(str(lm.method().meta().delegate(0)->runs_on), "portable");
  }
}

// ---- Host state from the app's allocator. ---------------------------------------------------------------

TEST(BackendContractTest, HostStateComesFromTheAppsAllocatorAndGoesBackAtUnload) {
  StateAllocator allocator;
  auto rt = MakeRuntime(true);
  rt->context.device_allocator = &allocator;
  uint64_t state_bytes = 0;
  {
    testing::LoadedMethod lm(testing::example("paged_attention").program.bytes, rt->context, WithBlocks({}), "step");
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    const Program& p = lm.program();
    ASSERT_EQ(p.state_count(), 2u);
    for (size_t s = 0; s < p.state_count(); ++s) {
      state_bytes += p.state(s).nbytes;
      EXPECT_EQ(allocator.allocated[p.state(s).name], p.state(s).nbytes) << p.state(s).name;
      EXPECT_EQ(allocator.live.count(p.state(s).data), 1u) << "state not from the app's allocator";
      EXPECT_EQ(p.state(s).memory.host_bytes, p.state(s).nbytes);
      ASSERT_EQ(p.state(s).memory.parts().size(), 1u);
      EXPECT_EQ(str(p.state(s).memory.parts()[0].purpose), "state");
      EXPECT_EQ(p.state(s).memory.parts()[0].domain, MemoryDomain::Host);
      EXPECT_EQ(p.state(s).memory.parts()[0].bytes, p.state(s).nbytes);
    }
    EXPECT_EQ(allocator.allocated_bytes(), state_bytes);
    EXPECT_EQ(allocator.owners, (std::vector<std::string>{"program", "program"}));
    for (uint32_t a : allocator.alignments) EXPECT_GE(a, 64u);
    // The state is used: a step runs with it.
    EXPECT_EQ(run_attention_steps(lm.method()).size(), 3u);
  }
  EXPECT_TRUE(allocator.live.empty());
  EXPECT_EQ(allocator.freed_bytes, state_bytes);
  EXPECT_EQ(allocator.bad_frees, 0);

  // State that sim owns is sim's memory: no host state is asked for.
  StateAllocator unused;
  rt->context.device_allocator = &unused;
  {
    testing::LoadedMethod lm(testing::example("paged_attention_sim").program.bytes, rt->context, WithBlocks({}),
                             "step");
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    ExpectSimOwnsTheCache(lm.program());
  }
  EXPECT_TRUE(unused.allocated.empty());
  for (const std::string& name : unused.asked) EXPECT_EQ(name.rfind("kv.", 0), std::string::npos) << name;
}

// ---- Device memory is not host memory. --------------------------------------------------------------------

TEST(BackendContractDeathTest, HostReadOfSimStateFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto rt = MakeRuntime(true);
  testing::LoadedMethod lm(testing::example("paged_attention_sim").program.bytes, rt->context, WithBlocks({}), "step");
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  ASSERT_EQ(run_attention_steps(lm.method()).size(), 3u);  // the backend opened and closed its memory
  testing::ExpectHostReadOfSimStateFaults(lm.program(), "kv.0.k");
}

// ---- Two owners of one state. -------------------------------------------------------------------------------

// The program with a second method `second`, a copy of `step` whose delegate 0 is exported for
// `backend`; with `host_graph`, the copy's graph is instead the portable export's `step` (the
// paged_attention kernel on the cache itself, in host code).
std::vector<uint8_t> WithSecondMethod(const char* backend, bool host_graph) {
  const std::vector<uint8_t>& portable = testing::example("paged_attention").program.bytes;
  return testing::mutate_program(testing::example("paged_attention_sim").program.bytes, [&](fb::ProgramT& p) {
    std::unique_ptr<fb::MethodT> copy(
        (host_graph ? testing::program_of(portable) : testing::program_of(testing::example("paged_attention_sim").program.bytes))
            ->methods()
            ->Get(0)
            ->UnPack());
    copy->name = "second";
    if (!host_graph) copy->delegates[0]->backend_id = backend;
    p.methods.push_back(std::move(copy));
  });
}

TEST(BackendContractTest, OneStateClaimedBySimAndByHostCodeFailsTheLoadNamingBoth) {
  auto rt = MakeRuntime(true);
  struct Case {
    const char* what;
    std::vector<uint8_t> file;
    LoadOptions options;
    const char* other;  // the second claimant as the message names it
  };
  const std::vector<Case> cases = {
      {"second method's delegate exported for null (host memory)", WithSecondMethod("null", false), WithBlocks({}),
       "null (method 'second' delegate 0)"},
      {"second method's delegate for an unregistered backend: portable fallback",
       WithSecondMethod("npu", false), WithBlocks({}), "portable (method 'second' delegate 0)"},
      {"second method runs paged_attention on the portable kernels", WithSecondMethod("", true), WithBlocks({}),
       "portable (method 'second')"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    testing::LoadedProgram lp(c.file, rt->context, c.options);
    ASSERT_FALSE(lp.ok());
    EXPECT_EQ(lp.error(), Error::InvalidArgument);
    const std::string message = lp.ctx().message;
    EXPECT_NE(message.find("state 'kv.0.k' is claimed by sim (method 'step' delegate 0) and by " +
                           std::string(c.other)),
              std::string::npos)
        << message;
  }
  // With a priority list, sim runs both delegates: one owner, and the two methods share the cache
  // (the first step on one Method, the next two on the other: as one portable Method's three).
  testing::LoadedProgram lp(WithSecondMethod("null", false), rt->context, WithBlocks(Priority({"sim"})));
  ASSERT_TRUE(lp.ok()) << lp.ctx().message;
  ExpectSimOwnsTheCache(lp.program());
  for (const char* name : {"step", "second"}) {
    EXPECT_EQ(str(lp.program().method_meta(name)->delegate(0)->runs_on), "sim") << name;
  }
  {
    testing::MethodMemory memory_a(lp.program().method_meta("step").value());
    testing::MethodMemory memory_b(lp.program().method_meta("second").value());
    ErrorContext ctx;
    Result<Method> a = lp.program().load_method("step", memory_a.plan(), &ctx);
    ASSERT_TRUE(a.is_ok()) << ctx.message;
    Result<Method> b = lp.program().load_method("second", memory_b.plan(), &ctx);
    ASSERT_TRUE(b.is_ok()) << ctx.message;
    auto plain = MakeRuntime(false);
    testing::LoadedMethod portable(testing::example("paged_attention").program.bytes, plain->context, WithBlocks({}),
                                   "step");
    ASSERT_TRUE(portable.ok()) << portable.ctx().message;
    const std::vector<HostTensor> expected = run_attention_steps(portable.method());
    ASSERT_EQ(expected.size(), 3u);
    const std::vector<HostTensor> got = run_attention_steps([&](size_t s) -> Method& { return s == 0 ? *a : *b; });
    ASSERT_EQ(got.size(), expected.size());
    for (size_t s = 0; s < got.size(); ++s) testing::ExpectBitwiseEqual(got[s], expected[s]);
  }
  // And without sim anywhere, everything is host code: it loads, the state is host memory.
  auto plain = MakeRuntime(false);
  testing::LoadedProgram host(WithSecondMethod("", true), plain->context, WithBlocks({}));
  ASSERT_TRUE(host.ok()) << host.ctx().message;
  EXPECT_NE(host.program().state_data("kv.0.k"), nullptr);
}

// A delegate with no backend and no fallback (Fallback::Fail) never runs, so it claims no state: the
// program loads, the method that can run does, and the other is refused with BackendUnavailable
// (before, Program::load failed with a state conflict naming an empty claimant).
TEST(BackendContractTest, ADelegateWithoutABackendClaimsNoState) {
  auto rt = MakeRuntime(true);
  testing::LoadedProgram lp(WithSecondMethod("npu", false), rt->context, WithBlocks(Priority({}, Fallback::Fail)));
  ASSERT_TRUE(lp.ok()) << lp.ctx().message;
  ExpectSimOwnsTheCache(lp.program());
  Result<MethodMeta> meta = lp.program().method_meta("second");
  ASSERT_TRUE(meta.is_ok());
  EXPECT_EQ(str(meta->delegate(0)->runs_on), "");
  testing::MethodMemory memory(*meta);
  ErrorContext ctx;
  Result<Method> second = lp.program().load_method("second", memory.plan(), &ctx);
  EXPECT_EQ(second.error(), Error::BackendUnavailable);
  EXPECT_NE(std::string(ctx.message).find("npu is not registered"), std::string::npos) << ctx.message;
  testing::MethodMemory step_memory(lp.program().method_meta("step").value());
  Result<Method> step = lp.program().load_method("step", step_memory.plan(), &ctx);
  ASSERT_TRUE(step.is_ok()) << ctx.message;
  EXPECT_EQ(run_attention_steps(*step).size(), 3u);
}

// ---- Hostile payloads. -------------------------------------------------------------------------------------------

fb::TensorT* StateValue(fb::GraphT& g, const char* name) {
  for (auto& v : g.values) {
    if (v->storage.type == fb::Storage::StateStorage && v->storage.AsStateStorage()->name == name) return v.get();
  }
  return nullptr;
}

// The sim delegate's payload edited by `edit`.
std::vector<uint8_t> EditPayload(const std::function<void(fb::GraphT&)>& edit) {
  return testing::mutate_program(testing::example("paged_attention_sim").program.bytes, [&](fb::ProgramT& p) {
    testing::mutate_payload(*p.methods[0]->delegates[0], edit);
  });
}

TEST(BackendContractTest, APayloadStateUnlikeItsDeclarationIsInvalidProgram) {
  struct Case {
    const char* what;
    std::vector<uint8_t> file;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"head_dim 8 -> 4", EditPayload([](fb::GraphT& g) {
         fb::TensorT* t = StateValue(g, "kv.0.k");
         t->dims[3] = fb::Dim(4, t->dims[3].sym());
         t->nbytes /= 2;
       }),
       "state 'kv.0.k' dtype or dims differ from its declaration"},
      {"block_size 4 -> 8", EditPayload([](fb::GraphT& g) {
         fb::TensorT* t = StateValue(g, "kv.0.v");
         t->dims[1] = fb::Dim(8, t->dims[1].sym());
         t->nbytes *= 2;
       }),
       "state 'kv.0.v' dtype or dims differ from its declaration"},
      {"rank 4 -> 3", EditPayload([](fb::GraphT& g) {
         fb::TensorT* t = StateValue(g, "kv.0.k");
         t->dims[2] = fb::Dim(t->dims[2].max() * t->dims[3].max(), 0);
         t->dims.pop_back();
       }),
       "state 'kv.0.k' dtype or dims differ from its declaration"},
      {"f32 -> f16", EditPayload([](fb::GraphT& g) {
         fb::TensorT* t = StateValue(g, "kv.0.k");
         t->dtype = fb::ScalarType::F16;
         t->nbytes /= 2;
       }),
       "state 'kv.0.k' dtype or dims differ from its declaration"},
      {"an undeclared state", EditPayload([](fb::GraphT& g) {
         StateValue(g, "kv.0.v")->storage.AsStateStorage()->name = "kv.7.v";
       }),
       "state 'kv.7.v' is not declared by the program"},
  };
  auto plain = MakeRuntime(false), with_sim = MakeRuntime(true);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    for (const testing::Runtime* rt : {plain.get(), with_sim.get()}) {
      for (Verification v : {Verification::Full, Verification::Structural}) {
        LoadOptions o = WithBlocks({});
        o.verification = v;
        testing::LoadedProgram lp(c.file, rt->context, o);
        ASSERT_FALSE(lp.ok());
        EXPECT_EQ(lp.error(), Error::InvalidProgram) << to_string(lp.error()) << ": " << lp.ctx().message;
        EXPECT_NE(std::string(lp.ctx().message).find(c.message), std::string::npos) << lp.ctx().message;
        EXPECT_NE(std::string(lp.ctx().message).find("delegate 0"), std::string::npos) << lp.ctx().message;
      }
    }
  }
  // Unedited, it loads under both.
  for (const testing::Runtime* rt : {plain.get(), with_sim.get()}) {
    testing::LoadedProgram lp(EditPayload([](fb::GraphT&) {}), rt->context, WithBlocks({}));
    EXPECT_TRUE(lp.ok()) << lp.ctx().message;
  }
}

}  // namespace
}  // namespace ember
