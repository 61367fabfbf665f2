// What the runner's modes share: options, failures, loading a program and sizing a method's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/data_loader.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/core/thread_pool.h"
#include "runtime/executor/memory_plan.h"
#include "runtime/executor/program.h"
#include "runtime/kernel/kernel_registry.h"

namespace ember::runner {

struct Options {
  std::string program;
  std::string info;
  std::string method;
  std::vector<std::string> inputs;
  std::string output_dir;
  int iterations = 1;
  int threads = 1;
  std::string cpu_target;  // empty: the best this CPU supports
  std::string backends;
  std::string verification = "full";
  bool mmap = false;
  bool verbose = false;
  std::string profile;
  uint64_t seed = 0;
  // LLM programs (llm_runner.cc).
  std::string prompt, prompts_file, system, tokenizer, encode, decode;
  std::string prompt_ids;   // --prompt-ids: the prompt as token ids (no tokenizer needed)
  std::string dump_logits;  // --dump-logits FILE.npy: the logits of every generated token
  std::vector<std::string> stops;
  bool chat = false, print_ids = false, ignore_eos = false, warmup = false;
  int max_new_tokens = 128;
  float temperature = -1.0f, top_p = -1.0f, repetition_penalty = -1.0f;  // < 0: the program's default
  int top_k = -1;
  int64_t kv_blocks = 0;  // 0: the program's maximum
};

// A one-line failure that main() prints as "runner: error: ...".
struct Failure {
  std::string message;
};

[[noreturn]] void fail(const std::string& message);
[[noreturn]] void fail(const Status& status, const ErrorContext& ctx, const std::string& what);

struct AlignedBuffer {
  void* data = nullptr;
  explicit AlignedBuffer(size_t size, size_t alignment = 64);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
};

// Everything a loaded program needs to stay alive.
struct Session {
  KernelRegistry kernels;
  BackendRegistry backends;
  std::unique_ptr<ThreadPool> pool;  // make_builtin_thread_pool(): shared with XNNPACK when built
  std::vector<std::string> backend_names;
  std::vector<const char*> backend_list;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<Program> program;
};

// Registers the kernels and backends, loads `path` (with --kv-blocks as the num_blocks symbol).
std::unique_ptr<Session> open_program(const std::string& path, const Options& o);

// Memory for one method, sized from its MethodMeta.
struct MethodMemory {
  std::unique_ptr<AlignedBuffer> method_buffer;
  std::unique_ptr<BumpAllocator> allocator;
  std::vector<std::unique_ptr<AlignedBuffer>> arena_buffers;
  std::vector<Span<uint8_t>> arenas;
  std::unique_ptr<AlignedBuffer> scratch;
  std::unique_ptr<MemoryPlan> plan;

  explicit MethodMemory(const MethodMeta& meta);
};

const char* method_name_or_default(const Program& program, const std::string& requested);

}  // namespace ember::runner
