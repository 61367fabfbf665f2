// Shared by onnx_importer_test.cc, onnx_importer_symbols_test.cc and onnx_importer_data_test.cc:
// the first import error as text, a relative-L2 check of evaluated outputs against a
// double-precision expectation, and REQUIRE_OP.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exporter/importers/onnx/onnx_importer.h"
#include "runtime/kernel/op_info.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter::testing {

inline constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

#define REQUIRE_OP(op) ASSERT_NE(find_op_info(op), nullptr) << "op " << static_cast<int>(op) << " has no OpInfo"

// The first problem (or "") of an import, as text.
inline std::string import_error(OnnxModel& m, std::vector<std::string> shapes = {}, const std::string& dir = ".") {
  try {
    import_model(m, std::move(shapes), dir);
  } catch (const ExportError& e) {
    return e.what();
  }
  return "";
}

inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected, double tol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    num += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    den += expected[i] * expected[i];
    if (std::abs(actual[i] - expected[i]) > tol * (1 + std::abs(expected[i]))) {
      ADD_FAILURE() << "first mismatch at " << i << ": " << actual[i] << " vs " << expected[i];
      return;
    }
  }
  EXPECT_LE(std::sqrt(num / (den + 1e-30)), tol);
}


}  // namespace ember::exporter::testing
