// The loader fuzz entry point (docs/DESIGN.md §8): Program::load + load_method + execute on untrusted bytes.
// Shared by the libFuzzer target (ember_fuzz_load) and the deterministic replay test, so the default
// suite exercises the same path without clang.
//
// Input: one control byte, then the file.
//   bit 0: recompute the header and FlatBuffer CRCs first, so mutations reach the verifier and the
//          semantic validator instead of stopping at the checksums
//   bit 1: Verification::Structural (segment hashes skipped: mutated weights get executed)
//   bit 2: no backend registered (null, sim): GRAPH delegates fall back to the portable kernels
//   bit 3: LoadOptions::backends = {"sim"}: every GRAPH delegate sim supports, and every Method
//          without delegates, runs on sim (retargeting; program state then lives in sim's memory)
// Verification::Trusted is never used: it is unsafe by definition.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::fuzz {

constexpr uint8_t kFixCrcs = 1;
constexpr uint8_t kStructural = 2;
constexpr uint8_t kNoBackends = 4;
constexpr uint8_t kPreferSim = 8;

// Returns 0 (libFuzzer's convention). Never aborts on bad input; a crash or sanitizer report is a bug.
int load_one(const uint8_t* data, size_t size);

// Statistics of the calls so far (for the replay test): how far inputs got.
struct Stats {
  uint64_t inputs = 0;
  uint64_t loaded = 0;          // Program::load succeeded
  uint64_t methods_loaded = 0;  // load_method succeeded
  uint64_t executed = 0;        // execute() returned Ok
};
const Stats& stats();

}  // namespace ember::fuzz
