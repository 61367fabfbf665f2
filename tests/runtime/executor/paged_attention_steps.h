// Shared by paged_attention_op_test.cc and backend_contract_test.cc: the dimensions of the
// paged-attention example (exporter/importers/builder/examples.h, testing::example("paged_attention")),
// a script of three steps over its KV cache, each step's inputs, and running the script on a Method.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "tests/common/program_util.h"

namespace ember::testing {

// Query heads, KV heads, head dim, tokens a block, blocks a sequence (block_tables columns); and the
// num_blocks the script's slots need (blocks 0..5).
inline constexpr int64_t kHq = 4, kHkv = 2, kD = 8, kBlockSize = 4, kMaxBlocks = 4, kNumBlocks = 6;

// One step: T tokens of S sequences and the metadata inputs (slot_mapping, block_tables,
// context_lens, query_start, logits_indices).
struct AttentionStep {
  int64_t T, S;
  std::vector<int32_t> slots, tables, lens, starts, idx;
};

// Sequence 0 owns blocks {3, 1}, sequence 1 owns {0, 5}: a 5-token and a 3-token prefill, then a
// chunk of 2 for sequence 0 with a decode for sequence 1, then two decodes (one padding token): each
// step reads what the earlier ones wrote into the cache.
inline std::vector<AttentionStep> attention_steps() {
  auto slot = [](int seq, int pos) {
    const int blocks[2][2] = {{3, 1}, {0, 5}};
    return blocks[seq][pos / kBlockSize] * int(kBlockSize) + pos % int(kBlockSize);
  };
  const std::vector<int32_t> tables = {3, 1, -1, -1, 0, 5, -1, -1};
  return {
      {8, 2, {slot(0, 0), slot(0, 1), slot(0, 2), slot(0, 3), slot(0, 4), slot(1, 0), slot(1, 1), slot(1, 2)},
       tables, {5, 3}, {0, 5, 8}, {4, 7}},
      {3, 2, {slot(0, 5), slot(0, 6), slot(1, 3)}, tables, {7, 4}, {0, 2, 3}, {1, 2}},
      {3, 2, {slot(0, 7), slot(1, 4), -1}, tables, {8, 5}, {0, 1, 2}, {0, 1}},  // one padding token
  };
}

// Step `s` of attention_steps() takes seeds 1 + 3s .. 3 + 3s for q, k and v.
inline uint32_t attention_step_seed(size_t s) { return uint32_t(1 + 3 * s); }

// The step's eight inputs: q [T, Hq, D], k and v [T, Hkv, D] (pattern(seed), pattern(seed + 1),
// pattern(seed + 2)), then its metadata.
inline std::vector<exporter::HostTensor> attention_step_inputs(const AttentionStep& st, uint32_t seed) {
  return {f32_tensor({st.T, kHq, kD}, pattern(size_t(st.T * kHq * kD), seed)),
          f32_tensor({st.T, kHkv, kD}, pattern(size_t(st.T * kHkv * kD), seed + 1)),
          f32_tensor({st.T, kHkv, kD}, pattern(size_t(st.T * kHkv * kD), seed + 2)),
          i32_tensor({st.T}, st.slots),
          i32_tensor({st.S, kMaxBlocks}, st.tables),
          i32_tensor({st.S}, st.lens),
          i32_tensor({st.S + 1}, st.starts),
          i32_tensor({st.S}, st.idx)};
}

// Runs every step of attention_steps() in order, step s on method_for(s): the output of every step
// (each must give one; on the first that does not, a failure and {}).
inline std::vector<exporter::HostTensor> run_attention_steps(const std::function<Method&(size_t)>& method_for) {
  std::vector<exporter::HostTensor> outputs;
  const std::vector<AttentionStep> steps = attention_steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<exporter::HostTensor> out =
        run_method(method_for(s), attention_step_inputs(steps[s], attention_step_seed(s)));
    EXPECT_EQ(out.size(), 1u);
    if (out.size() != 1) return {};
    outputs.push_back(std::move(out[0]));
  }
  return outputs;
}

// Every step on `method`.
inline std::vector<exporter::HostTensor> run_attention_steps(Method& method) {
  return run_attention_steps([&method](size_t) -> Method& { return method; });
}

}  // namespace ember::testing
