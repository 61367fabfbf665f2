// A minimal app that links libruntime.a (+ the backends of register_builtin_backends()) the way an embedded app would: every
// byte of memory is a static pool the app owns; nothing is allocated after load.
//   usage: ember_example_app model.pte
#include <cstdio>
#include <vector>

#include "backends/builtin.h"
#include "kernels/builtin.h"
#include "runtime/core/data_loader.h"
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"

alignas(64) static uint8_t method_pool[64 * 1024];       // Program/Method structures
alignas(64) static uint8_t activation_pool[1024 * 1024];  // planned by the exporter
alignas(64) static uint8_t io_pool[256 * 1024];
static ember::KernelRegistry kernels;
static ember::BackendRegistry backends;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s model.pte\n", argv[0]);
    return 2;
  }
  if (!ember::register_builtin(kernels).is_ok() ||
      !ember::register_builtin_backends(backends).is_ok()) {
    return 1;
  }
  ember::ErrorContext ctx;
  ember::Result<ember::MmapDataLoader> loader = ember::MmapDataLoader::open(argv[1], &ctx);
  if (!loader.is_ok()) {
    std::fprintf(stderr, "error: %s: %s\n", ember::to_string(loader.error()), ctx.message);
    return 1;
  }
  ember::RuntimeContext runtime;
  runtime.kernels = &kernels;
  runtime.backends = &backends;
  ember::Result<ember::Program> program = ember::Program::load(loader.value(), runtime, {}, &ctx);
  if (!program.is_ok()) {
    std::fprintf(stderr, "error: %s: %s\n", ember::to_string(program.error()), ctx.message);
    return 1;
  }
  const char* name = program->method_name(0);
  ember::Result<ember::MethodMeta> meta = program->method_meta(name, &ctx);
  // Hand each arena a slice of the static pools, in the method's arena order.
  ember::Span<uint8_t> arenas[8];
  size_t arena_count = meta->arena_count();
  if (arena_count > 8) return 1;
  for (size_t a = 0; a < arena_count; ++a) {
    const ember::ArenaMeta arena = meta->arena(a).value();
    uint8_t* pool = arena.kind == ember::ArenaMeta::Kind::IO ? io_pool : activation_pool;
    const size_t capacity = arena.kind == ember::ArenaMeta::Kind::IO ? sizeof(io_pool) : sizeof(activation_pool);
    if (arena.size > capacity) {
      std::fprintf(stderr, "error: arena %zu needs %llu bytes, the app has %zu\n", a,
                   static_cast<unsigned long long>(arena.size), capacity);
      return 1;
    }
    arenas[a] = ember::Span<uint8_t>(pool, capacity);
  }
  ember::BumpAllocator method_allocator(method_pool);
  ember::MemoryPlan memory(method_allocator, ember::Span<ember::Span<uint8_t>>(arenas, arena_count));
  ember::Result<ember::Method> method = program->load_method(name, memory, &ctx);
  if (!method.is_ok()) {
    std::fprintf(stderr, "error: %s: %s\n", ember::to_string(method.error()), ctx.message);
    return 1;
  }
  for (size_t i = 0; i < method->input_count(); ++i) {
    const ember::TensorView input = method->input(i).value();
    if (input.dtype != ember::ScalarType::F32) continue;
    for (uint64_t k = 0; k < input.numel(); ++k) input.data_as<float>()[k] = 0.01f * static_cast<float>(k % 100);
  }
  if (!method->execute(&ctx).is_ok()) {
    std::fprintf(stderr, "error: %s\n", ctx.message);
    return 1;
  }
  const ember::TensorView& out = *method->output(0);
  std::printf("%s: output 0 has %llu elements; first = %g\n", name, static_cast<unsigned long long>(out.numel()),
              out.dtype == ember::ScalarType::F32 && out.numel() ? out.data_as<float>()[0] : 0.0);
  return 0;
}
