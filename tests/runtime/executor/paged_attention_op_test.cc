// paged_attention and logits_gather as ops: a GraphBuilder program whose KV caches are program
// state (docs/DESIGN.md §2, §6), exported, loaded with a chosen num_blocks and run for several steps (chunked
// prefill of two sequences, then decodes) against kernels::reference::paged_attention on caches
// of its own; bad step metadata fails execute() with InvalidArgument and leaves the cache alone;
// the validator refuses a program whose cache is not state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "exporter/importers/builder/examples.h"
#include "kernels/reference/paged_attention.h"
#include "tests/common/program_util.h"
#include "tests/common/test_util.h"
#include "tests/runtime/executor/paged_attention_steps.h"

namespace ember {
namespace {

using exporter::HostTensor;
using testing::AttentionStep;
using testing::f32_tensor;
using testing::i32_tensor;
using testing::kBlockSize;
using testing::kD;
using testing::kHkv;
using testing::kHq;
using testing::kMaxBlocks;

// exporter/importers/builder/examples.h: q, k, v, slot_mapping, block_tables, context_lens,
// query_start, logits_indices -> logits_gather(reshape(paged_attention(...), [T, Hq * D])).
exporter::Graph attention_graph(ScalarType cache_dtype, bool cache_as_state = true) {
  return exporter::build_paged_attention_example(cache_dtype, cache_as_state);
}

void check_cache(ScalarType cache_dtype) {
  SCOPED_TRACE(to_string(cache_dtype));
  const int64_t num_blocks = 6;
  const SymbolValue symbols[] = {{"num_blocks", num_blocks}};
  LoadOptions options;
  options.symbols = Span<const SymbolValue>(symbols, 1);
  testing::Runtime rt;
  testing::LoadedMethod lm(testing::export_program(attention_graph(cache_dtype)).program.bytes, rt.context, options);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  const Program::State* state = lm.program().find_state("kv.0.k");
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->dims[0], num_blocks);
  const size_t elem = nbytes_of(cache_dtype, 1);
  EXPECT_EQ(state->nbytes, uint64_t(num_blocks * kBlockSize * kHkv * kD) * elem);

  std::vector<uint8_t> ref_k(state->nbytes, 0), ref_v(state->nbytes, 0);
  const std::vector<AttentionStep> steps = testing::attention_steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    const AttentionStep& st = steps[s];
    const std::vector<HostTensor> inputs = testing::attention_step_inputs(st, testing::attention_step_seed(s));
    const HostTensor &q = inputs[0], &k = inputs[1], &v = inputs[2];
    const std::vector<HostTensor> got = testing::run_method(lm.method(), inputs);
    ASSERT_EQ(got.size(), 1u);

    std::vector<float> expected(size_t(st.T * kHq * kD));
    ASSERT_TRUE(kernels::reference::paged_attention(
                    reinterpret_cast<const float*>(q.bytes.data()), reinterpret_cast<const float*>(k.bytes.data()),
                    reinterpret_cast<const float*>(v.bytes.data()), st.T, st.S, kHq, kHkv, kD, cache_dtype,
                    ref_k.data(), ref_v.data(), num_blocks, kBlockSize, 0.05f, st.slots.data(), st.tables.data(),
                    kMaxBlocks, st.lens.data(), st.starts.data(), 1.0f / std::sqrt(float(kD)), expected.data())
                    .is_ok());
    std::vector<float> gathered;
    for (int32_t row : st.idx) {
      gathered.insert(gathered.end(), expected.begin() + row * kHq * kD, expected.begin() + (row + 1) * kHq * kD);
    }
    testing::ExpectAllClose(got[0], f32_tensor({st.S, kHq * kD}, gathered), {1e-5f, 1e-5f});
  }
  // The runtime's cache holds exactly what the reference wrote (bitwise: same encodings).
  EXPECT_EQ(std::memcmp(state->data, ref_k.data(), ref_k.size()), 0);
  EXPECT_EQ(std::memcmp(lm.program().state_data("kv.0.v"), ref_v.data(), ref_v.size()), 0);
}

TEST(PagedAttentionOp, StepsMatchTheReferenceForEveryCacheDtype) {
  for (ScalarType dtype : {ScalarType::F32, ScalarType::BF16, ScalarType::F16, ScalarType::F8E4M3FN}) {
    check_cache(dtype);
  }
}

TEST(PagedAttentionOp, BadMetadataIsInvalidArgumentAndTheCacheIsUntouched) {
  const SymbolValue symbols[] = {{"num_blocks", 6}};
  LoadOptions options;
  options.symbols = Span<const SymbolValue>(symbols, 1);
  testing::Runtime rt;
  testing::LoadedMethod lm(testing::export_program(attention_graph(ScalarType::F32)).program.bytes, rt.context,
                           options);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  const Program::State* state = lm.program().find_state("kv.0.k");
  struct Case {
    std::vector<int32_t> slots, tables, lens, starts, idx;
    const char* message;
  } cases[] = {
      {{11, 13}, {3, -1, -1, -1}, {2}, {0, 2}, {1}, "token 0 (sequence 0, position 0) has slot 11, expected 12"},
      {{12, 14}, {3, -1, -1, -1}, {2}, {0, 2}, {1}, "token 1 (sequence 0, position 1) has slot 14, expected 13"},
      {{24, 25}, {6, -1, -1, -1}, {2}, {0, 2}, {1}, "block_tables[0] = 6, outside [0, 6)"},
      {{12, 13}, {3, -1, -1, -1}, {1}, {0, 2}, {1}, "context_len 1, outside [q_len 2"},
      {{12, 13}, {3, -1, -1, -1}, {2}, {0, 3}, {1}, "query_start[S = 1] = 3 exceeds the 2 tokens"},
      {{12, 13}, {3, -1, -1, -1}, {2}, {0, 2}, {2}, "logits_gather: index 2 at 0 is outside [-1, 2)"},
  };
  for (const Case& c : cases) {
    const std::vector<uint8_t> before(state->data, state->data + state->nbytes);
    const std::vector<float> x(2 * kHq * kD, 1.0f), kv(2 * kHkv * kD, 1.0f);
    const std::vector<HostTensor> inputs = {
        f32_tensor({2, kHq, kD}, x), f32_tensor({2, kHkv, kD}, kv), f32_tensor({2, kHkv, kD}, kv),
        i32_tensor({2}, c.slots), i32_tensor({1, kMaxBlocks}, c.tables), i32_tensor({1}, c.lens),
        i32_tensor({2}, c.starts), i32_tensor({1}, c.idx)};
    ErrorContext ctx;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_TRUE(lm.method().set_input_sizes(i, Span<const int64_t>(inputs[i].dims.data(), inputs[i].dims.size()), &ctx).is_ok())
          << ctx.message;
      ASSERT_TRUE(lm.method().set_input(i, testing::view_of(inputs[i]), &ctx).is_ok()) << ctx.message;
    }
    const Status s = lm.method().execute(&ctx);
    EXPECT_EQ(s.code(), Error::InvalidArgument) << c.message;
    EXPECT_NE(std::string(ctx.message).find(c.message), std::string::npos) << ctx.message;
    if (std::string(c.message).find("logits_gather") == std::string::npos) {
      EXPECT_EQ(std::memcmp(state->data, before.data(), before.size()), 0) << "cache modified: " << c.message;
    }
  }
}

TEST(PagedAttentionOp, TheExporterRefusesACacheThatIsNotState) {
  try {
    testing::export_program(attention_graph(ScalarType::F32, /*cache_as_state=*/false));
    FAIL() << "exported";
  } catch (const exporter::ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("must be program state"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember
