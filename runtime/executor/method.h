// Method: one executable instance of a program's method. Single-threaded: one thread calls
// execute() at a time (request_abort() may come from any thread). Two Methods of one Program may run
// on two threads. After load, execute() makes no heap allocation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/core/status.h"
#include "runtime/core/tensor_view.h"
#include "runtime/executor/method_meta.h"
#include "runtime/interpreter/graph_runner.h"

namespace ember {

class Program;
class ThreadPool;

class Method {
 public:
  Method(Method&& other) noexcept;
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;
  ~Method();  // destroys every delegate handle exactly once

  size_t input_count() const;
  size_t output_count() const;
  // Input i in the IO arena: write its bytes through `data` (dims = the current sizes; change sizes
  // only with set_input_sizes). A copy, so the Method's own view cannot be corrupted through it.
  // InvalidArgument when out of range.
  Result<TensorView> input(size_t i) const;
  // Binds the sizes of input i (symbols); see GraphRunner::set_input_dims for the checks.
  Status set_input_sizes(size_t i, Span<const int64_t> dims, ErrorContext* ctx = nullptr);
  // Copies `src` into input i after checking its dtype and sizes (InvalidArgument otherwise).
  Status set_input(size_t i, const TensorView& src, ErrorContext* ctx = nullptr);
  // Output i after execute(); null when out of range.
  const TensorView* output(size_t i) const;

  // Runs the method. Errors: InvalidArgument (inputs), Cancelled, BackendFailed, ...
  Status execute(ErrorContext* ctx = nullptr);
  // Calls `tracer` around every instruction of execute() (null = off). Borrowed: it must outlive
  // the Method or be reset first.
  void set_event_tracer(EventTracer* tracer) { runner_.set_event_tracer(tracer); }
  // Asks a running (or the next) execute() to stop between instructions with Cancelled.
  void request_abort() { abort_.store(true); }

  MethodMeta meta() const { return meta_; }
  size_t instruction_count() const;
  // What runs instruction i: a kernel library ("cpu", "reference"), or for a delegate call the
  // backend's name, or "portable (fallback for <id>)"; "<backend> (whole method)" for every
  // instruction when a backend runs the whole body.
  const char* instruction_backend(size_t i) const;
  // What delegate i's backend took at init (Backend::memory_requirements); equal to
  // meta().delegate(i)->memory. i may be DelegateMeta::kWholeMethod. Zero on portable kernels.
  MemoryRequirements delegate_memory(uint32_t i) const;

 private:
  friend class Program;
  // What runs delegate d: the runner's binding (backend + handle, or a fallback runner), and its
  // label for instruction_backend().
  using DelegateSlot = GraphRunner::DelegateBinding;
  struct DelegateLabel {
    char text[64] = {0};
  };
  Method() = default;
 public:
  static const size_t kDelegateSlotBytes;  // for exact MethodMeta byte counts
 private:
  static Status init_backend(const Program& program, const char* method_name, uint32_t index, const fb::Delegate* del,
                             const fb::Graph& graph, const Backend* backend, const char* backend_name,
                             BumpAllocator& alloc, DelegateSlot& slot, DelegateLabel& label, ErrorContext* ctx);
  void destroy_delegates();

  const Program* program_ = nullptr;
  const fb::Method* method_ = nullptr;
  MethodMeta meta_;
  GraphRunner runner_;
  DelegateSlot* delegates_ = nullptr;  // bound to runner_ (set_delegates)
  DelegateLabel* labels_ = nullptr;
  uint32_t delegate_count_ = 0;
  DelegateSlot* whole_ = nullptr;      // set when a backend runs the whole body
  DelegateLabel* whole_label_ = nullptr;
  Span<uint8_t> scratch_;
  ThreadPool* pool_ = nullptr;  // copied at load: execute() never touches the Program's context
  std::atomic<bool> abort_{false};
};

}  // namespace ember
