// Shared helpers for the exporter tests.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "exporter/partition/manifest.h"
#include "exporter/pipeline.h"

namespace ember::exporter::testing {

inline std::string test_data_path(const std::string& name) {
  return std::string(EMBER_EXPORTER_TEST_DIR) + "/data/" + name;
}

inline const CapabilityManifest& test_manifest() {
  static const CapabilityManifest m = CapabilityManifest::load(test_data_path("test_manifest.json"));
  return m;
}

// A fresh path under the temp directory (removed by the caller or left for inspection).
inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ember_exporter_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

// Runs the runtime's header decode, FlatBuffers verifier and semantic validator on a file; returns
// "" when it passes, otherwise the first problem.
std::string validate_with_runtime(const std::vector<uint8_t>& file);

// A random DAG over [rows, width] f32 activations (rows = 3, or the symbol "rows" in 1..6): unary,
// binary, linear, concat and slice ops reading random earlier values, so lifetimes overlap in many
// ways. Deterministic for a seed.
Graph random_graph(uint64_t seed, bool symbolic);

}  // namespace ember::exporter::testing
