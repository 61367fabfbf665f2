#include "tests/fuzz/fuzz_load.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/null/register.h"
#include "backends/sim/register.h"
#include "kernels/builtin.h"
#include "runtime/core/data_loader.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"
#include "runtime/kernel/kernel_registry.h"
#include "runtime/platform/platform.h"
#include "tests/common/pte_edit.h"

namespace ember::fuzz {
namespace {

constexpr uint64_t kMaxArenaBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxTotalBytes = uint64_t{256} << 20;
constexpr size_t kMaxMethods = 4;

struct Env {
  Env() {
    PlatformHooks hooks;
    hooks.log = [](LogLevel, const char*, int, const char*) {};
    set_platform_hooks(hooks);
    if (!register_builtin(kernels).is_ok()) std::abort();
    if (!backends::null_backend::register_backend(with_backends).is_ok()) std::abort();
    if (!backends::sim::register_backend(with_backends).is_ok()) std::abort();
  }
  KernelRegistry kernels;
  BackendRegistry with_backends;
  BackendRegistry without_backends;
};

Env& env() {
  static Env* e = new Env();  // never destroyed: no exit-time order issues
  return *e;
}

Stats g_stats;

struct Free {
  void operator()(void* p) const { std::free(p); }
};
using Block = std::unique_ptr<uint8_t, Free>;

Block alloc_block(uint64_t size, size_t alignment) {
  const uint64_t rounded = (size == 0 ? alignment : (size + alignment - 1) / alignment * alignment);
  void* p = std::aligned_alloc(alignment, static_cast<size_t>(rounded));
  if (p != nullptr) std::memset(p, 0, static_cast<size_t>(rounded));
  return Block(static_cast<uint8_t*>(p));
}

void run_method(const Program& program, const char* name) {
  ErrorContext ctx;
  Result<MethodMeta> meta = program.method_meta(name, &ctx);
  if (!meta.is_ok()) return;
  uint64_t total = meta->method_allocator_bytes() + meta->scratch_bytes();
  if (meta->method_allocator_bytes() > kMaxArenaBytes || meta->scratch_bytes() > kMaxArenaBytes) return;
  std::vector<Block> blocks;
  std::vector<Span<uint8_t>> arenas;
  for (size_t a = 0; a < meta->arena_count(); ++a) {
    Result<ArenaMeta> arena = meta->arena(a);
    if (!arena.is_ok() || arena->size > kMaxArenaBytes) return;
    total += arena->size;
    if (total > kMaxTotalBytes) return;
    const size_t alignment = arena->alignment < 64 ? 64 : arena->alignment;
    if (alignment > 65536 || (alignment & (alignment - 1)) != 0) return;
    blocks.push_back(alloc_block(arena->size, alignment));
    if (!blocks.back()) return;
    arenas.emplace_back(blocks.back().get(), static_cast<size_t>(arena->size));
  }
  Block allocator_memory = alloc_block(meta->method_allocator_bytes(), 64);
  Block scratch = alloc_block(meta->scratch_bytes(), 64);
  if (!allocator_memory || !scratch) return;
  BumpAllocator allocator(Span<uint8_t>(allocator_memory.get(), meta->method_allocator_bytes()));
  MemoryPlan memory(allocator, Span<Span<uint8_t>>(arenas.data(), arenas.size()),
                    Span<uint8_t>(scratch.get(), meta->scratch_bytes()));
  Result<Method> method = program.load_method(name, memory, &ctx);
  if (!method.is_ok()) return;
  ++g_stats.methods_loaded;
  for (size_t i = 0; i < method->input_count(); ++i) {
    Result<TensorMeta> im = meta->input(i);
    if (!im.is_ok()) return;
    if (!method->set_input_sizes(i, Span<const int64_t>(im->max_dims, im->rank), &ctx).is_ok()) return;
    Result<TensorView> view = method->input(i);
    if (!view.is_ok()) return;
    const TensorView& v = *view;
    if (v.data != nullptr) {
      uint8_t* p = static_cast<uint8_t*>(v.data);
      const uint64_t n = v.nbytes();
      if (v.dtype == ScalarType::F32) {
        for (uint64_t k = 0; k + 4 <= n; k += 4) {
          const float f = 0.125f * static_cast<float>((k / 4) % 17) - 1.0f;
          std::memcpy(p + k, &f, 4);
        }
      } else {
        for (uint64_t k = 0; k < n; ++k) p[k] = static_cast<uint8_t>(k % 3);  // small, valid indices/bools
      }
    }
  }
  for (int rep = 0; rep < 2; ++rep) {
    if (method->execute(&ctx).is_ok()) ++g_stats.executed;
  }
  for (size_t o = 0; o < method->output_count(); ++o) (void)method->output(o);
}

}  // namespace

const Stats& stats() { return g_stats; }

int load_one(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Env& e = env();
  ++g_stats.inputs;
  const uint8_t control = data[0];
  std::vector<uint8_t> file(data + 1, data + size);
  if ((control & kFixCrcs) && file.size() >= kHeaderSize) testing::recompute_crcs(file);
  // A 64-aligned copy, as an app's buffer would be; the loader copies misaligned ranges itself.
  Block bytes = alloc_block(file.size(), 64);
  if (!bytes) return 0;
  if (!file.empty()) std::memcpy(bytes.get(), file.data(), file.size());
  BufferDataLoader loader(bytes.get(), file.size());
  RuntimeContext runtime;
  runtime.kernels = &e.kernels;
  runtime.backends = (control & kNoBackends) ? &e.without_backends : &e.with_backends;
  static const char* const kSim[] = {backends::sim::kBackendId};
  LoadOptions options;
  if (control & kPreferSim) options.backends = Span<const char* const>(kSim, 1);
  options.verification = (control & kStructural) ? Verification::Structural : Verification::Full;
  options.max_state_bytes = kMaxArenaBytes;  // a hostile file must not make load allocate gigabytes
  ErrorContext ctx;
  Result<Program> program = Program::load(loader, runtime, options, &ctx);
  if (!program.is_ok()) return 0;
  ++g_stats.loaded;
  for (size_t m = 0; m < program->method_count() && m < kMaxMethods; ++m) run_method(*program, program->method_name(m));
  return 0;
}

}  // namespace ember::fuzz
