// Shared between program.cc, method.cc and method_meta.cc; not part of the public API.
#pragma once

#include <cstddef>

#include "runtime/backend/backend.h"
#include "runtime/executor/method_meta.h"
#include "runtime/program/graph_view.h"

namespace ember {
class Program;
namespace internal {

const fb::Method* find_method(const fb::Program& program, const char* name);

// Compile specs of a delegate as views into the program (count: size of delegate.compile_specs(),
// at most kMaxCompileSpecs, checked by the caller).
constexpr uint32_t kMaxCompileSpecs = 64;
void read_compile_specs(const fb::Delegate& delegate, CompileSpec* out);

size_t method_allocator_bytes(const Program& program, const fb::Method& method);
// MethodMeta::scratch_bytes(): the file's figure or the bound kernels' need, the larger.
size_t method_scratch_bytes(const Program& program, const fb::Method& method);
MethodMeta method_meta(const Program& program, const fb::Method& method);

}  // namespace internal
}  // namespace ember
