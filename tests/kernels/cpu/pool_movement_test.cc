// kernels/cpu pooling and movement ops against their reference twins on every target.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/register.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/register.h"
#include "runtime/kernel/kernel_registry.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

struct PoolCase {
  const char* name;
  int64_t n, c, h, w;
  int32_t kernel[2], stride[2], padding[4], dilation[2];
  bool ceil_mode, count_include_pad;
};

const PoolCase kPoolCases[] = {
    {"2x2 s2", 1, 3, 8, 40, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false},
    {"3x3 s1 pad1", 2, 2, 9, 37, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false},
    {"3x3 s1 pad1 incl", 2, 2, 9, 37, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, true},
    {"3x3 s2 pad1 ceil", 1, 4, 14, 33, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false},
    {"3x3 s2 pad1 ceil incl", 1, 4, 14, 33, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},
    {"2x2 s2 ceil odd", 1, 2, 7, 35, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, false},
    {"asym pad", 1, 2, 10, 21, {3, 2}, {1, 1}, {1, 0, 0, 1}, {1, 1}, false, true},
    {"dilation2", 1, 2, 12, 40, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, false, false},
    {"narrow", 1, 2, 5, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, false},
    {"resnet stem", 1, 8, 56, 56, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
    {"1x1", 1, 3, 4, 19, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, false},
    // Interiors narrower than a full vector: 8- and 4-lane vectors (pool.cc PoolUnits).
    {"resnet 32 s2 (15 interior)", 1, 4, 32, 32, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
    {"11 wide s1 (9 interior)", 1, 2, 6, 11, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, true},
    {"6 wide s1 (4 interior)", 1, 2, 5, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false},
    {"13 wide s2 (5 interior)", 2, 3, 9, 13, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true},
    // 3x3 / 2 max pool, the separable path (pool.cc): no padding, asymmetric padding, blocks of 8
    // output rows and a partial one, and an output row over its 128-column buffers (the per-row path).
    {"3x3 s2 no pad", 1, 3, 19, 23, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false},
    {"3x3 s2 pad (1, 0, 0, 1)", 1, 2, 20, 17, {3, 3}, {2, 2}, {1, 0, 0, 1}, {1, 1}, false, false},
    {"3x3 s2 pad1, 37 rows out", 1, 2, 74, 30, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false},
    {"3x3 s2 pad1, 150 wide out", 1, 2, 5, 300, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
};

using PoolTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(PoolTest);

TEST_P(PoolTest, MaxAndAvg) {
  for (const PoolCase& c : kPoolCases) {
    OpAttrs attrs;
    attrs.kind = AttrKind::Pool2d;
    for (int i = 0; i < 2; ++i) {
      attrs.kernel[i] = c.kernel[i];
      attrs.stride[i] = c.stride[i];
      attrs.dilation[i] = c.dilation[i];
    }
    for (int i = 0; i < 4; ++i) attrs.padding[i] = c.padding[i];
    attrs.ceil_mode = c.ceil_mode;
    attrs.count_include_pad = c.count_include_pad;
    Tensor x = Random({c.n, c.c, c.h, c.w}, 51, -4.0f, 4.0f);
    SCOPED_TRACE(c.name);
    CheckTwin(OpCode::MaxPool2d, cpu::max_pool2d, ref::max_pool2d, attrs, {x.view}, kExact);
    if (c.dilation[0] == 1 && c.dilation[1] == 1) {
      CheckTwin(OpCode::AvgPool2d, cpu::avg_pool2d, ref::avg_pool2d, attrs, {x.view},
                Tolerance{1e-6f, 1e-5f});
    }
  }
}

TEST_P(PoolTest, MaxPoolPropagatesNaN) {
  OpAttrs attrs;
  attrs.kind = AttrKind::Pool2d;
  attrs.kernel[0] = attrs.kernel[1] = 2;
  attrs.stride[0] = attrs.stride[1] = 1;
  Tensor x = Random({1, 1, 4, 40}, 52);
  x.f()[45] = std::numeric_limits<float>::quiet_NaN();
  x.f()[0] = std::numeric_limits<float>::quiet_NaN();
  CheckTwin(OpCode::MaxPool2d, cpu::max_pool2d, ref::max_pool2d, attrs, {x.view}, kExact);
}

// The separable 3x3 / 2 max pool sends a block of 8 output rows whose input rows hold a NaN to the
// exact per-row path; the other blocks of the plane stay separable: NaN where the reference has it.
TEST_P(PoolTest, MaxPool3s2NaNInOneBlock) {
  OpAttrs attrs;
  attrs.kind = AttrKind::Pool2d;
  attrs.kernel[0] = attrs.kernel[1] = 3;
  attrs.stride[0] = attrs.stride[1] = 2;
  for (int i = 0; i < 4; ++i) attrs.padding[i] = 1;
  Tensor x = Random({1, 2, 56, 56}, 53);
  x.f()[30 * 56 + 17] = std::numeric_limits<float>::quiet_NaN();            // plane 0, row 30
  x.f()[56 * 56 + 55 * 56 + 55] = std::numeric_limits<float>::quiet_NaN();  // plane 1, last element
  const Tensor out = CheckTwin(OpCode::MaxPool2d, cpu::max_pool2d, ref::max_pool2d, attrs, {x.view}, kExact);
  EXPECT_TRUE(std::isnan(out.f()[15 * 28 + 8]));
  EXPECT_FALSE(std::isnan(out.f()[0]));
}

TEST_P(PoolTest, GlobalAverage) {
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1, 1, 1}, {2, 3, 7, 7}, {1, 5, 33, 35}, {1, 4, 1, 17}, {2, 64, 4, 4}, {1, 2, 100, 100},
      {0, 3, 4, 4},
  };
  for (const auto& s : shapes) {
    Tensor x = Random(s, 53, -2.0f, 3.0f);
    SCOPED_TRACE(DimsText(x.view));
    CheckTwin(OpCode::GlobalAvgPool2d, cpu::global_avg_pool2d, ref::global_avg_pool2d, OpAttrs{},
              {x.view}, Tolerance{1e-6f, 1e-5f});
  }
}

// Element sizes 1, 2, 4 and 8 bytes: movement ops are byte-exact.
const ScalarType kDtypes[] = {ScalarType::U8, ScalarType::F16, ScalarType::F32, ScalarType::I64,
                              ScalarType::Bool, ScalarType::F8E4M3FN};

using MovementTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(MovementTest);

TEST_P(MovementTest, Transpose) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> cases = {
      {{37, 53}, {1, 0}},          {{1, 5}, {1, 0}},           {{64, 64}, {1, 0}},
      {{3, 4, 5}, {0, 2, 1}},      {{3, 4, 5}, {2, 0, 1}},     {{3, 4, 5}, {1, 0, 2}},
      {{3, 4, 5}, {0, 1, 2}},      {{2, 3, 4, 5}, {0, 2, 3, 1}}, {{2, 1, 4, 1}, {3, 2, 1, 0}},
      {{2, 3, 4, 5, 6}, {4, 2, 0, 3, 1}}, {{5, 0, 3}, {2, 1, 0}}, {{7}, {0}},
      {{33, 2, 40}, {2, 1, 0}},    {{8, 100, 3}, {0, 2, 1}},
  };
  for (ScalarType t : kDtypes) {
    for (const auto& [dims, perm] : cases) {
      Tensor x = RandomBytes(t, dims, 62);
      OpAttrs attrs;
      attrs.kind = AttrKind::Permute;
      attrs.count = static_cast<uint8_t>(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) attrs.perm[i] = perm[i];
      SCOPED_TRACE(testing::Message() << to_string(t) << " " << DimsText(x.view));
      CheckTwin(OpCode::Transpose, cpu::transpose, ref::transpose, attrs, {x.view}, kExact);
    }
  }
}

TEST_P(MovementTest, Concat) {
  for (ScalarType t : kDtypes) {
    for (int axis : {0, 1, 2, -1, -3}) {
      std::vector<int64_t> d0 = {2, 3, 5}, d1 = d0, d2 = d0;
      const int a = axis < 0 ? axis + 3 : axis;
      d0[a] = 1, d1[a] = 4, d2[a] = 0;
      Tensor x0 = RandomBytes(t, d0, 63), x1 = RandomBytes(t, d1, 64), x2 = RandomBytes(t, d2, 65),
             x3 = RandomBytes(t, d1, 66);
      OpAttrs attrs;
      attrs.kind = AttrKind::Axis;
      attrs.axis = axis;
      SCOPED_TRACE(testing::Message() << to_string(t) << " axis " << axis);
      CheckTwin(OpCode::Concat, cpu::concat, ref::concat, attrs, {x0.view, x1.view, x2.view, x3.view},
                kExact);
      CheckTwin(OpCode::Concat, cpu::concat, ref::concat, attrs, {x1.view}, kExact);
    }
  }
}

TEST_P(MovementTest, Slice) {
  struct SliceCase {
    std::vector<int64_t> dims;
    std::vector<int32_t> axes;
    std::vector<int64_t> starts, ends, steps;
  };
  const int64_t kBig = std::numeric_limits<int64_t>::max();
  const std::vector<SliceCase> cases = {
      {{10, 20}, {1}, {2}, {15}, {1}},
      {{10, 20}, {0, 1}, {1, 3}, {9, 20}, {2, 3}},
      {{10, 20}, {-1}, {-1}, {-kBig}, {-1}},
      {{10, 20}, {0}, {-3}, {kBig}, {1}},
      {{4, 5, 6}, {2, 0}, {5, 3}, {0, -kBig}, {-2, -1}},
      {{4, 5, 6}, {1}, {7}, {9}, {1}},
      {{4, 5, 6}, {}, {}, {}, {}},
      {{3, 40, 7}, {1}, {1}, {39}, {1}},
      {{3, 40, 7}, {2}, {0}, {7}, {3}},
  };
  for (ScalarType t : kDtypes) {
    for (const SliceCase& c : cases) {
      Tensor x = RandomBytes(t, c.dims, 67);
      OpAttrs attrs;
      attrs.kind = AttrKind::Slice;
      attrs.count = static_cast<uint8_t>(c.axes.size());
      for (size_t i = 0; i < c.axes.size(); ++i) {
        attrs.axes[i] = c.axes[i];
        attrs.starts[i] = c.starts[i];
        attrs.ends[i] = c.ends[i];
        attrs.steps[i] = c.steps[i];
      }
      SCOPED_TRACE(testing::Message() << to_string(t) << " " << DimsText(x.view));
      CheckTwin(OpCode::Slice, cpu::slice, ref::slice, attrs, {x.view}, kExact);
    }
  }
}

TEST(CpuRegisterTest, RegistersEveryKeyOnceAndReferenceFillsNothingMore) {
  static KernelRegistry registry;
  ASSERT_TRUE(register_cpu_kernels(registry).is_ok());
  const size_t cpu_count = registry.size();
  // + the importer's f32 clip .. batch_norm (11), where f32 and pad f32, and linear with a quantized
  // weight (5 layouts x 3 bias forms); the LLM ops: rms_norm, rope, silu_mul, embedding (f32, bf16,
  // f16 weights), sample; paged_attention (f32, bf16, f16, fp8 caches); linear with a bf16 weight
  // (3 bias forms). Issue 17: lstm (63 keys: inputs 3..8, every subset of the optional ones) and gru
  // (15 keys: inputs 3..6); resize (1), conv_transpose2d (3 bias forms); reduce_max, reduce_min,
  // argmax, argmin, group_norm (f32, 5).
  // Issue 17's elementwise ops: f32 max, min, prelu, the 4 comparisons, leaky_relu, elu, selu,
  // softplus, log, abs (13 keys); the reference fills in their other 26 (reciprocal, floor, ceil,
  // round, sin, cos; abs, max, min and the 4 comparisons on i32 / i64; neg i32 / i64; and / or / xor /
  // not).
  constexpr size_t kElementwise17Cpu = 13, kElementwise17Reference = 26;
  EXPECT_EQ(cpu_count, 10u + 6u + 4u + 7u + 13u * (2u + 15u) + 11u + 2u + 15u + 7u + 4u + 3u + 63u + 15u + 1u + 3u +
                           5u + kElementwise17Cpu);
  ASSERT_TRUE(register_reference_kernels(registry, /*only_missing=*/true).is_ok());
  // The reference fills in only the ops the cpu library leaves to it: the byte copies reshape (13
  // dtypes) and logits_gather (1 key); the importer's equal (4 keys), where / expand / gather (i32,
  // i64) over 13 dtypes minus where f32, pad over 9 dtypes minus f32, and cast (9 x 9).
  // Issue 17: reduce_max / reduce_min / argmax / argmin over i32 and i64 (8), cumsum (3 dtypes),
  // reduce_prod, topk, gather_elements (i32, i64 indices over 13 dtypes).
  EXPECT_EQ(registry.size(), cpu_count + 13u + 1u + 4u + (13u * 4u - 1u) + (9u - 1u) + 81u + 8u + 3u + 1u + 1u + 26u +
                                 kElementwise17Reference);
  EXPECT_FALSE(register_cpu_kernels(registry).is_ok());  // duplicates
  for (size_t i = 0; i < registry.size(); ++i) {
    const KernelKey& key = registry.entry(i).key;
    const bool reference_only = key.op == OpCode::Reshape || key.op == OpCode::LogitsGather ||
                                key.op == OpCode::Equal || key.op == OpCode::Cast || key.op == OpCode::Expand ||
                                key.op == OpCode::Gather ||
                                // Issue 17: reference-only ops, and the integer reductions / arg ops.
                                key.op == OpCode::CumSum || key.op == OpCode::ReduceProd || key.op == OpCode::TopK ||
                                key.op == OpCode::GatherElements ||
                                ((key.op == OpCode::ReduceMax || key.op == OpCode::ReduceMin ||
                                  key.op == OpCode::ArgMax || key.op == OpCode::ArgMin) &&
                                 key.dtypes[0] != ScalarType::F32) ||
                                ((key.op == OpCode::Where || key.op == OpCode::Pad) &&
                                 key.dtypes[key.arg_count - 1] != ScalarType::F32) ||
                                key.op == OpCode::Reciprocal || key.op == OpCode::Floor || key.op == OpCode::Ceil ||
                                key.op == OpCode::Round || key.op == OpCode::Sin || key.op == OpCode::Cos ||
                                key.op == OpCode::And || key.op == OpCode::Or || key.op == OpCode::Xor ||
                                key.op == OpCode::Not || (key.op == OpCode::Neg && key.dtypes[0] != ScalarType::F32) ||
                                ((key.op == OpCode::Abs || key.op == OpCode::Max || key.op == OpCode::Min ||
                                  key.op == OpCode::Greater || key.op == OpCode::Less ||
                                  key.op == OpCode::GreaterOrEqual || key.op == OpCode::LessOrEqual) &&
                                 key.dtypes[0] != ScalarType::F32);
    EXPECT_STREQ(registry.entry(i).library, reference_only ? "reference" : "cpu")
        << to_string(key.op);
  }
  EXPECT_EQ(cpu_scratch_bytes(OpCode::Linear, OpAttrs{}, nullptr, 0, nullptr, 0), 0u);
}

}  // namespace
}  // namespace ember::kernels::cpu_test
