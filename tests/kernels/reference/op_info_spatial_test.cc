// Shape functions of resize and conv_transpose2d (op_info_spatial.cc, issue 17).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "runtime/kernel/op_info.h"
#include "tests/kernels/reference/op_info_test_util.h"

namespace ember {
namespace {

using testing::absent;
using testing::F;
using testing::OpInfoTest;
using testing::run;
using testing::tv;

OpAttrs resize_attrs(std::initializer_list<int64_t> sizes, std::initializer_list<float> scales) {
  OpAttrs a;
  a.kind = AttrKind::Resize;
  a.count = static_cast<uint8_t>(sizes.size());
  int i = 0;
  for (int64_t s : sizes) a.shape[i++] = s;
  i = 0;
  for (float s : scales) a.resize_scales[i++] = s;
  return a;
}

TEST_F(OpInfoTest, ResizeSizesAndScales) {
  // Explicit sizes win; -1 is onnxruntime's static_cast<int64_t>(scale * in) in f32.
  expect_dims(run(OpCode::Resize, resize_attrs({1, 3, 8, 10}, {1, 1, 2, 2}), {tv(F, {1, 3, 4, 5})}), {1, 3, 8, 10});
  expect_dims(run(OpCode::Resize, resize_attrs({-1, -1, -1, -1}, {1, 1, 2, 0.5f}), {tv(F, {2, 3, 7, 9})}),
              {2, 3, 14, 4});
  // 0.6f * 5 = 3.0000002 in f32 -> 3; 1.0f / 3 * 3 rounds to exactly 1.
  expect_dims(run(OpCode::Resize, resize_attrs({-1, -1}, {0.6f, 1.0f / 3}), {tv(F, {5, 3})}), {3, 1});
  expect_dims(run(OpCode::Resize, resize_attrs({0, -1}, {1, 2}), {tv(F, {0, 3})}), {0, 6});
}

TEST_F(OpInfoTest, ResizeErrors) {
  const OpCode op = OpCode::Resize;
  expect_invalid(run(op, resize_attrs({2, 2}, {1, 1}), {tv(F, {2, 2, 2})}), op, "2 sizes / scales for input [2, 2, 2]");
  expect_invalid(run(op, resize_attrs({-1, -1}, {1, 0}), {tv(F, {2, 2})}), op, "scale 0 of dim 1");
  expect_invalid(run(op, resize_attrs({-1, -1}, {1, std::numeric_limits<float>::infinity()}), {tv(F, {2, 2})}), op,
                 "finite and > 0");
  expect_invalid(run(op, resize_attrs({-1, -2}, {1, 1}), {tv(F, {2, 2})}), op, "output size -2 of dim 1");
  expect_invalid(run(op, resize_attrs({2, 4}, {1, 1}), {tv(F, {2, 0})}), op, "dim 1 is empty");
  expect_invalid(run(op, resize_attrs({-1, -1}, {1, 1e30f}), {tv(F, {2, 1000000})}), op, "overflows");
  OpAttrs bad = resize_attrs({4}, {2});
  bad.resize_coord = ResizeCoord::Invalid;
  expect_invalid(run(op, bad, {tv(F, {2})}), op, "coordinate mode 0");
  bad = resize_attrs({4}, {2});
  bad.resize_mode = ResizeMode::Cubic;
  bad.cubic_a = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(run(op, bad, {tv(F, {2})}), op, "cubic coefficient");
}

OpAttrs conv_t_attrs(int32_t s, int32_t pad, int32_t outpad, int32_t groups = 1, int32_t dil = 1) {
  OpAttrs a;
  a.kind = AttrKind::Conv2d;
  a.stride[0] = a.stride[1] = s;
  a.dilation[0] = a.dilation[1] = dil;
  for (int32_t& p : a.padding) p = pad;
  a.output_padding[0] = a.output_padding[1] = outpad;
  a.groups = groups;
  return a;
}

TEST_F(OpInfoTest, ConvTranspose2d) {
  const OpCode op = OpCode::ConvTranspose2d;
  // out = s * (in - 1) + outpad + (k - 1) * d + 1 - pads.
  expect_dims(run(op, conv_t_attrs(2, 0, 0), {tv(F, {1, 8, 9, 13}), tv(F, {8, 4, 2, 2}), tv(F, {4})}), {1, 4, 18, 26});
  expect_dims(run(op, conv_t_attrs(2, 1, 1), {tv(F, {2, 3, 5, 7}), tv(F, {3, 5, 3, 3}), absent()}), {2, 5, 10, 14});
  expect_dims(run(op, conv_t_attrs(1, 0, 0, 2, 2), {tv(F, {1, 4, 5, 5}), tv(F, {4, 3, 3, 3})}), {1, 6, 9, 9});
  expect_invalid(run(op, conv_t_attrs(1, 0, 0), {tv(F, {1, 4, 5}), tv(F, {4, 3, 3, 3})}), op, "[N, C, H, W]");
  expect_invalid(run(op, conv_t_attrs(1, 0, 0), {tv(F, {1, 4, 5, 5}), tv(F, {3, 3, 3, 3})}), op,
                 "needs 4 input channels");
  expect_invalid(run(op, conv_t_attrs(1, 0, 0, 3), {tv(F, {1, 4, 5, 5}), tv(F, {4, 3, 3, 3})}), op,
                 "not divisible by groups 3");
  expect_invalid(run(op, conv_t_attrs(1, 0, 0), {tv(F, {1, 4, 5, 5}), tv(F, {4, 3, 3, 3}), tv(F, {4})}), op,
                 "bias must be [3]");
  expect_invalid(run(op, conv_t_attrs(0, 0, 0), {tv(F, {1, 4, 5, 5}), tv(F, {4, 3, 3, 3})}), op, "stride 0");
  expect_invalid(run(op, conv_t_attrs(1, 0, -1), {tv(F, {1, 4, 5, 5}), tv(F, {4, 3, 3, 3})}), op, "output padding -1");
  expect_invalid(run(op, conv_t_attrs(1, -1, 0), {tv(F, {1, 4, 5, 5}), tv(F, {4, 3, 3, 3})}), op, "negative padding");
  // 1 * (2 - 1) + 3 - 2 - 2 = 0.
  expect_invalid(run(op, conv_t_attrs(1, 2, 0), {tv(F, {1, 4, 2, 2}), tv(F, {4, 3, 3, 3})}), op, "empty output along H");
  OpAttrs clamp = conv_t_attrs(1, 0, 0);
  clamp.out_min = 2.0f;
  clamp.out_max = 1.0f;
  expect_invalid(run(op, clamp, {tv(F, {1, 4, 5, 5}), tv(F, {4, 3, 3, 3})}), op, "output clamp");
}

}  // namespace
}  // namespace ember
