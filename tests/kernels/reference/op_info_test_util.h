// The OpInfoTest fixture and helpers shared by op_info_test.cc and op_info_<family>_test.cc:
// building TensorViews, running an op's shape function, checking its result or its message.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "runtime/kernel/op_info.h"
#include "runtime/platform/platform.h"

namespace ember::testing {

constexpr ScalarType F = ScalarType::F32;
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// Expected failures log at Error level; keep the test output readable.
inline bool g_quiet = false;
inline void test_log(LogLevel, const char* file, int line, const char* message) {
  if (!g_quiet) std::fprintf(stderr, "[ember %s:%d] %s\n", file, line, message);
}

inline TensorView tv(ScalarType dtype, std::initializer_list<int64_t> dims) {
  TensorView v;
  v.dtype = dtype;
  v.rank = static_cast<uint8_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) v.dims[i++] = d;
  return v;
}

inline TensorView absent() { return TensorView(); }

inline std::vector<int64_t> dims_of(const TensorView& v) {
  return std::vector<int64_t>(v.dims, v.dims + v.rank);
}

struct Outcome {
  Status status;
  TensorView out;
  ErrorContext ctx;
  bool ok() const { return status.is_ok(); }
};

inline Outcome run(OpCode op, const OpAttrs& attrs, std::vector<TensorView> inputs,
                   std::vector<int64_t> symbols = {}) {
  Outcome r;
  const OpInfo* info = find_op_info(op);
  if (info == nullptr) {
    r.status = Status(Error::Internal);
    return r;
  }
  r.status = info->shape(attrs, inputs.data(), inputs.size(), &r.out, 1,
                         Span<const int64_t>(symbols.data(), symbols.size()), &r.ctx);
  return r;
}

class OpInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PlatformHooks hooks;
    hooks.log = test_log;
    set_platform_hooks(hooks);
    g_quiet = true;
  }
  void TearDown() override { g_quiet = false; }

  // The call failed with InvalidArgument and a message that starts with the op name and
  // contains `fragment`.
  static void expect_invalid(const Outcome& r, OpCode op, const char* fragment = "") {
    EXPECT_EQ(r.status.code(), Error::InvalidArgument) << r.ctx.message;
    EXPECT_EQ(r.ctx.code, Error::InvalidArgument);
    const std::string message = r.ctx.message;
    EXPECT_EQ(message.rfind(std::string(to_string(op)) + ":", 0), 0u) << message;
    EXPECT_NE(message.find(fragment), std::string::npos)
        << "message '" << message << "' lacks '" << fragment << "'";
  }
  static void expect_dims(const Outcome& r, std::vector<int64_t> dims, ScalarType dtype = F) {
    ASSERT_TRUE(r.ok()) << r.ctx.message;
    EXPECT_EQ(dims_of(r.out), dims);
    EXPECT_EQ(r.out.dtype, dtype);
  }
};

}  // namespace ember::testing
