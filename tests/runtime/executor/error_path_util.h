// Shared by error_path_test.cc, error_path_hostile_test.cc and error_path_run_test.cc: load-and-run
// of a (damaged) program reporting the first error, the ErrorPathTest fixture, and the method graph
// of a program's object API.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "schema/program_generated.h"
#include "tests/common/program_util.h"
#include "tests/common/test_util.h"

namespace ember::testing {

struct Outcome {
  Error code = Error::Ok;
  std::string message;
  ErrorContext::Phase phase = ErrorContext::Phase::None;
};

// Loads bytes [0, size) of an aligned buffer and, when that works, loads every method with memory
// from its meta, sets every input at its max dims and executes twice. Returns the first error.
inline Outcome LoadAndRun(const uint8_t* data, size_t size, const RuntimeContext& runtime,
                          const LoadOptions& options, bool run = true) {
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

inline Outcome LoadAndRun(const std::vector<uint8_t>& file, const RuntimeContext& runtime,
                          const LoadOptions& options = {}, bool run = true) {
  testing::AlignedBuffer bytes(file.data(), file.size(), 65536);
  return LoadAndRun(bytes.data(), file.size(), runtime, options, run);
}

inline LoadOptions WithVerification(Verification v) {
  LoadOptions o;
  o.verification = v;
  return o;
}

inline const std::vector<uint8_t>& Example(const char* name) { return testing::example(name).program.bytes; }

class ErrorPathTest : public ::testing::Test {
 protected:
  testing::QuietLogs quiet_;
  testing::Runtime rt_;
};

inline fb::GraphT& MethodGraph(fb::ProgramT& p) { return *p.methods[0]->graph; }

}  // namespace ember::testing
