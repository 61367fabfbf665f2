// Replays a few thousand deterministic mutations (byte flips, word overwrites, truncations,
// splices, insertions/deletions) of the example programs through the fuzz entry point, so the
// default suite covers the fuzzed path without clang. Also writes the libFuzzer seed corpus: the
// examples (among them programs with GRAPH delegates for null and for sim, one of which holds the
// KV cache state of a paged-attention step) and hostile variants of the sim step program.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/program_util.h"
#include "tests/common/pte_edit.h"
#include "tests/fuzz/fuzz_load.h"

namespace ember {
namespace {

std::vector<uint8_t> WithControl(uint8_t control, const std::vector<uint8_t>& file) {
  std::vector<uint8_t> input;
  input.reserve(file.size() + 1);
  input.push_back(control);
  input.insert(input.end(), file.begin(), file.end());
  return input;
}

int RunOne(const std::vector<uint8_t>& input) { return fuzz::load_one(input.data(), input.size()); }

const char* const kExamples[] = {"mlp", "cnn", "cnn_null", "cnn_sim", "paged_attention", "paged_attention_sim"};
constexpr size_t kExampleCount = sizeof(kExamples) / sizeof(kExamples[0]);

TEST(FuzzReplayTest, SeedsLoadAndExecuteUnderEveryControlByte) {
  for (const char* name : kExamples) {
    for (uint8_t control = 0; control < 16; ++control) {
      const fuzz::Stats before = fuzz::stats();
      RunOne(WithControl(control, testing::example(name).program.bytes));
      const fuzz::Stats after = fuzz::stats();
      EXPECT_EQ(after.loaded, before.loaded + 1) << name << " control " << int(control);
      // paged_attention's step metadata from the harness's filler bytes is refused by the op's
      // input check (InvalidArgument from execute): loaded, not executed.
      const uint64_t executes = std::string(name).rfind("paged_attention", 0) == 0 ? 0 : 2;
      EXPECT_EQ(after.executed, before.executed + executes) << name << " control " << int(control);
    }
  }
}

// Inputs libFuzzer once crashed on (control byte + file), kept in tests/fuzz/regressions/. Each must
// be refused at load; under the sanitizer build a regression is a sanitizer report.
//   misaligned_dims_vector.bin: a Tensor.dims vector ([Dim], 8-byte structs) 4 bytes off, which the
//   FlatBuffers verifier accepts (it checks vector length fields only); the validator now refuses it.
//   huge_state.bin: the paged-attention seed with a KV state of 8 GB (libFuzzer: out-of-memory in
//   Program::load); LoadOptions::max_state_bytes (the harness allows 64 MiB) now refuses it first.
TEST(FuzzReplayTest, RegressionInputsAreRefused) {
  for (const char* name : {"misaligned_dims_vector.bin", "huge_state.bin"}) {
    const std::string path = std::string(EMBER_FUZZ_REGRESSIONS_DIR) + "/" + name;
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr) << path;
    std::vector<uint8_t> input;
    uint8_t buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) input.insert(input.end(), buf, buf + n);
    std::fclose(f);
    ASSERT_GT(input.size(), 64u);
    const fuzz::Stats before = fuzz::stats();
    RunOne(input);
    EXPECT_EQ(fuzz::stats().loaded, before.loaded) << name << " loaded";
  }
}

// The sim step program (paged_attention_sim: the KV cache state in sim's GRAPH delegate) with its
// payload's state edited: a state whose dims differ from its declaration, one whose dtype does, and
// one the program does not declare. The validator refuses each (InvalidProgram naming the state).
std::vector<std::pair<std::string, std::vector<uint8_t>>> HostileStatePayloads() {
  auto edit = [](const std::function<void(fb::TensorT&)>& change) {
    return testing::mutate_program(testing::example("paged_attention_sim").program.bytes, [&](fb::ProgramT& p) {
      testing::mutate_payload(*p.methods[0]->delegates[0], [&](fb::GraphT& g) {
        for (auto& v : g.values) {
          if (v->storage.type == fb::Storage::StateStorage && v->storage.AsStateStorage()->name == "kv.0.k") {
            change(*v);
            return;
          }
        }
        ADD_FAILURE() << "no kv.0.k in the payload";
      });
    });
  };
  return {
      {"state_dims", edit([](fb::TensorT& t) {
         t.dims[3] = fb::Dim(t.dims[3].max() / 2, t.dims[3].sym());
         t.nbytes /= 2;
       })},
      {"state_dtype", edit([](fb::TensorT& t) {
         t.dtype = fb::ScalarType::F16;
         t.nbytes /= 2;
       })},
      {"state_undeclared", edit([](fb::TensorT& t) { t.storage.AsStateStorage()->name = "kv.9.k"; })},
  };
}

TEST(FuzzReplayTest, HostileStatePayloadsAreRefused) {
  for (const auto& [name, file] : HostileStatePayloads()) {
    for (uint8_t control = 0; control < 16; ++control) {
      const fuzz::Stats before = fuzz::stats();
      RunOne(WithControl(control, file));
      EXPECT_EQ(fuzz::stats().loaded, before.loaded) << name << " control " << int(control) << " loaded";
    }
  }
}

std::vector<uint8_t> Mutate(const std::vector<uint8_t>& base, const std::vector<uint8_t>& other, std::mt19937_64& rng) {
  std::vector<uint8_t> f = base;
  const FileHeader h = testing::header_of(base);
  const size_t fb_begin = h.flatbuffer_offset, fb_end = h.flatbuffer_offset + h.flatbuffer_size;
  auto uniform = [&](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  // Positions: mostly inside the FlatBuffer (where structure lives), sometimes anywhere.
  auto position = [&] { return uniform(0, 3) != 0 ? uniform(fb_begin, fb_end - 1) : uniform(0, f.size() - 1); };
  switch (uniform(0, 6)) {
    case 0:
    case 1: {  // flip 1..4 bytes
      const size_t n = uniform(1, 4);
      for (size_t i = 0; i < n; ++i) f[position()] ^= static_cast<uint8_t>(uniform(1, 255));
      break;
    }
    case 2: {  // an interesting 32-bit value at an aligned word
      static const uint32_t kValues[] = {0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000u, 0xFFFFFFFFu, 64, 65536,
                                         static_cast<uint32_t>(base.size())};
      size_t at = position() & ~size_t{3};
      if (at + 4 > f.size()) at = f.size() - 4;
      const uint32_t v = kValues[uniform(0, sizeof(kValues) / sizeof(kValues[0]) - 1)];
      for (int i = 0; i < 4; ++i) f[at + i] = static_cast<uint8_t>(v >> (8 * i));
      break;
    }
    case 3:  // truncate
      f.resize(uniform(0, f.size() - 1));
      break;
    case 4: {  // splice a range of the other example over this one
      const size_t len = uniform(1, 256);
      const size_t dst = position();
      const size_t src = uniform(0, other.size() - 1);
      for (size_t i = 0; i < len && dst + i < f.size() && src + i < other.size(); ++i) f[dst + i] = other[src + i];
      break;
    }
    case 5: {  // delete bytes inside the FlatBuffer (shifts everything after)
      const size_t at = uniform(fb_begin, fb_end - 1);
      const size_t len = std::min(uniform(1, 16), f.size() - at);
      f.erase(f.begin() + static_cast<std::ptrdiff_t>(at), f.begin() + static_cast<std::ptrdiff_t>(at + len));
      break;
    }
    default: {  // insert bytes inside the FlatBuffer
      const size_t at = uniform(fb_begin, fb_end - 1);
      const size_t len = uniform(1, 16);
      std::vector<uint8_t> junk(len);
      for (uint8_t& b : junk) b = static_cast<uint8_t>(uniform(0, 255));
      f.insert(f.begin() + static_cast<std::ptrdiff_t>(at), junk.begin(), junk.end());
      break;
    }
  }
  return f;
}

TEST(FuzzReplayTest, DeterministicMutationsNeverCrash) {
  constexpr int kPerExample = 1200;
  std::mt19937_64 rng(20261122);
  const fuzz::Stats before = fuzz::stats();
  for (size_t e = 0; e < kExampleCount; ++e) {
    const std::vector<uint8_t>& base = testing::example(kExamples[e]).program.bytes;
    const std::vector<uint8_t>& other = testing::example(kExamples[(e + 1) % kExampleCount]).program.bytes;
    for (int i = 0; i < kPerExample; ++i) {
      std::vector<uint8_t> mutated = Mutate(base, other, rng);
      // Mostly with CRCs fixed, so the verifier and the validator see the mutation.
      uint8_t control = static_cast<uint8_t>(rng() & 15);
      if (rng() % 4 != 0) control |= fuzz::kFixCrcs;
      RunOne(WithControl(control, mutated));
    }
  }
  const fuzz::Stats after = fuzz::stats();
  const uint64_t inputs = after.inputs - before.inputs;
  EXPECT_EQ(inputs, kExampleCount * kPerExample);
  // Not a correctness criterion, but a sign the mutations are not all stopped at the first check.
  EXPECT_GT(after.loaded - before.loaded, inputs / 20);
  std::printf("replayed %llu inputs: %llu loaded, %llu methods loaded, %llu executes ok\n",
              static_cast<unsigned long long>(inputs),
              static_cast<unsigned long long>(after.loaded - before.loaded),
              static_cast<unsigned long long>(after.methods_loaded - before.methods_loaded),
              static_cast<unsigned long long>(after.executed - before.executed));
}

TEST(FuzzReplayTest, TinyAndDegenerateInputs) {
  const std::vector<std::vector<uint8_t>> inputs = {
      {}, {0}, {1}, {1, 'E', 'M', 'B', 'R'}, std::vector<uint8_t>(65, 0), std::vector<uint8_t>(65, 0xFF)};
  for (const auto& in : inputs) RunOne(in);
  // A header alone, CRCs fixed, claiming a FlatBuffer that is not there.
  std::vector<uint8_t> header(1 + 64 + 64, 0);
  FileHeader h;
  h.flatbuffer_offset = 64;
  h.flatbuffer_size = 64;
  encode_header(h, header.data() + 1);
  header[0] = fuzz::kFixCrcs;
  RunOne(header);
  SUCCEED();
}

// Seed corpus for ember_fuzz_load: every example under a few control bytes, and the hostile state
// payloads (one mutation away from loading).
TEST(FuzzReplayTest, WritesSeedCorpus) {
  const std::string dir = EMBER_FUZZ_CORPUS_DIR;
  ::mkdir(dir.c_str(), 0755);
  std::vector<std::pair<std::string, std::vector<uint8_t>>> programs;
  for (const char* name : kExamples) programs.emplace_back(name, testing::example(name).program.bytes);
  for (auto& hostile : HostileStatePayloads()) programs.emplace_back("paged_attention_sim_" + hostile.first, hostile.second);
  size_t written = 0;
  for (const auto& [name, bytes] : programs) {
    for (uint8_t control : {uint8_t{0}, uint8_t{fuzz::kFixCrcs}, uint8_t{fuzz::kFixCrcs | fuzz::kStructural},
                            uint8_t{fuzz::kFixCrcs | fuzz::kNoBackends}, uint8_t{fuzz::kFixCrcs | fuzz::kPreferSim}}) {
      const std::vector<uint8_t> input = WithControl(control, bytes);
      const std::string path = dir + "/" + name + "_" + std::to_string(control);
      FILE* f = std::fopen(path.c_str(), "wb");
      ASSERT_NE(f, nullptr) << path;
      written += std::fwrite(input.data(), 1, input.size(), f) == input.size();
      std::fclose(f);
    }
  }
  EXPECT_EQ(written, 5 * programs.size());
  EXPECT_EQ(programs.size(), kExampleCount + 3);
}

}  // namespace
}  // namespace ember
