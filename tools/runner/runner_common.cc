#include "tools/runner/runner_common.h"

#include <algorithm>
#include <cstring>

#include "backends/builtin.h"
#include "kernels/builtin.h"
#include "runtime/platform/platform.h"

namespace ember::runner {

void fail(const std::string& message) { throw Failure{message}; }

void fail(const Status& status, const ErrorContext& ctx, const std::string& what) {
  std::string message = what + ": " + to_string(status.code());
  if (ctx.message[0] != '\0') message += std::string(": ") + ctx.message;
  fail(message);
}

AlignedBuffer::AlignedBuffer(size_t size, size_t alignment) : data(platform_aligned_alloc(alignment, size)) {
  if (!data) fail("out of memory allocating " + std::to_string(size) + " bytes");
  std::memset(data, 0, size);
}

AlignedBuffer::~AlignedBuffer() { platform_aligned_free(data); }

std::unique_ptr<Session> open_program(const std::string& path, const Options& o) {
  auto s = std::make_unique<Session>();
  if (!register_builtin(s->kernels).is_ok()) fail("kernel registration failed");
  if (!register_builtin_backends(s->backends).is_ok()) fail("backend registration failed");
  if (o.threads < 1 || o.threads > 64) fail("--threads must be in 1..64, got " + std::to_string(o.threads));
  s->pool = make_builtin_thread_pool(static_cast<size_t>(o.threads));

  LoadOptions options;
  if (o.verification == "full") options.verification = Verification::Full;
  else if (o.verification == "structural") options.verification = Verification::Structural;
  else if (o.verification == "trusted") options.verification = Verification::Trusted;
  else fail("--verify must be full, structural or trusted, got '" + o.verification + "'");
  if (!o.backends.empty()) {
    size_t start = 0;
    bool portable = false;
    while (start <= o.backends.size()) {
      const size_t comma = std::min(o.backends.find(',', start), o.backends.size());
      const std::string name = o.backends.substr(start, comma - start);
      if (name == "portable") {
        portable = true;
      } else if (s->backends.find(name.c_str()) == nullptr) {
        fail("--backends: unknown backend '" + name + "' (this build has: " + builtin_backend_names() + ", portable)");
      } else {
        s->backend_names.push_back(name);
      }
      start = comma + 1;
    }
    for (const std::string& n : s->backend_names) s->backend_list.push_back(n.c_str());
    options.backends = Span<const char* const>(s->backend_list.data(), s->backend_list.size());
    if (s->backend_list.empty()) options.backends = Span<const char* const>(nullptr, 0);
    options.fallback = portable ? Fallback::Portable : Fallback::Fail;
    if (s->backend_list.empty()) {
      // Only "portable": no backend may run a delegate.
      static const char* const kNone[] = {"<portable only>"};
      options.backends = Span<const char* const>(kNone, 1);
    }
  }

  static SymbolValue kv_blocks;
  if (o.kv_blocks != 0) {
    if (o.kv_blocks < 1) fail("--kv-blocks must be >= 1, got " + std::to_string(o.kv_blocks));
    kv_blocks = SymbolValue{"num_blocks", o.kv_blocks};
    options.symbols = Span<const SymbolValue>(&kv_blocks, 1);
  }
  ErrorContext ctx;
  if (o.mmap) {
    Result<MmapDataLoader> loader = MmapDataLoader::open(path.c_str(), &ctx);
    if (!loader.is_ok()) fail(loader.status(), ctx, "cannot open " + path);
    s->loader = std::make_unique<MmapDataLoader>(std::move(loader).value());
  } else {
    Result<FileDataLoader> loader = FileDataLoader::open(path.c_str(), &ctx);
    if (!loader.is_ok()) fail(loader.status(), ctx, "cannot open " + path);
    s->loader = std::make_unique<FileDataLoader>(std::move(loader).value());
  }
  RuntimeContext runtime;
  runtime.pool = s->pool.get();
  runtime.kernels = &s->kernels;
  runtime.backends = &s->backends;
  static RuntimeContext stored;
  stored = runtime;
  Result<Program> program = Program::load(*s->loader, stored, options, &ctx);
  if (!program.is_ok()) fail(program.status(), ctx, "cannot load " + path);
  s->program = std::make_unique<Program>(std::move(program).value());
  // --backends without 'portable': a method the listed backends cannot run whole (and that has no
  // delegates) is an error, never a silent run on the portable kernels (--info still describes it).
  if (options.fallback == Fallback::Fail && !s->backend_list.empty() && o.info.empty()) {
    for (size_t m = 0; m < s->program->method_count(); ++m) {
      Result<MethodMeta> meta = s->program->method_meta(s->program->method_name(m), &ctx);
      if (!meta.is_ok() || meta->delegate_count() != 0) continue;
      const Result<DelegateMeta> body = meta->delegate(DelegateMeta::kWholeMethod);
      if (body.is_ok() && std::strcmp(body->runs_on, "portable") == 0) {
        fail("--backends " + o.backends + ": no listed backend runs method '" + meta->name() + "' (" + body->reason +
             "); add 'portable' to the list to allow the portable kernels");
      }
    }
  }
  return s;
}

MethodMemory::MethodMemory(const MethodMeta& meta) {
  method_buffer = std::make_unique<AlignedBuffer>(meta.method_allocator_bytes() + 64);
  allocator = std::make_unique<BumpAllocator>(
      Span<uint8_t>(static_cast<uint8_t*>(method_buffer->data), meta.method_allocator_bytes() + 64));
  for (size_t a = 0; a < meta.arena_count(); ++a) {
    const ArenaMeta arena = meta.arena(a).value();
    arena_buffers.push_back(std::make_unique<AlignedBuffer>(arena.size + 64, std::max<size_t>(64, arena.alignment)));
    arenas.emplace_back(static_cast<uint8_t*>(arena_buffers.back()->data), arena.size);
  }
  scratch = std::make_unique<AlignedBuffer>(meta.scratch_bytes() + 64);
  plan = std::make_unique<MemoryPlan>(*allocator, Span<Span<uint8_t>>(arenas.data(), arenas.size()),
                                      Span<uint8_t>(static_cast<uint8_t*>(scratch->data), meta.scratch_bytes()));
}

const char* method_name_or_default(const Program& program, const std::string& requested) {
  if (!requested.empty()) return requested.c_str();
  if (program.method_count() == 0) fail("the program has no methods");
  return program.method_name(0);
}

}  // namespace ember::runner
