// Shape functions of the data-movement ops (op_info_movement.cc): reshape (with symbols),
// transpose, concat, slice clamping, pad, gather and expand.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "runtime/kernel/op_info.h"
#include "tests/kernels/reference/op_info_test_util.h"

namespace ember {
namespace {

using testing::F;
using testing::kI64Max;
using testing::kI64Min;
using testing::OpInfoTest;
using testing::run;
using testing::tv;

// ---- Reshape
// -------------------------------------------------------------------------------------

OpAttrs reshape_attrs(std::initializer_list<int64_t> shape, std::initializer_list<int> syms = {}) {
  OpAttrs a;
  a.kind = AttrKind::Reshape;
  a.count = static_cast<uint8_t>(shape.size());
  int i = 0;
  for (int64_t d : shape) a.shape[i++] = d;
  i = 0;
  for (int s : syms) a.shape_sym[i++] = static_cast<uint16_t>(s);
  return a;
}

TEST_F(OpInfoTest, Reshape) {
  const OpCode op = OpCode::Reshape;
  expect_dims(run(op, reshape_attrs({4, -1}), {tv(F, {2, 3, 4})}), {4, 6});
  expect_dims(run(op, reshape_attrs({}), {tv(F, {1, 1})}), {});
  expect_dims(run(op, reshape_attrs({-1}), {tv(ScalarType::I64, {})}), {1}, ScalarType::I64);
  // 0 is a literal zero, not "copy the input dim".
  expect_dims(run(op, reshape_attrs({0, 5}), {tv(F, {2, 0, 3})}), {0, 5});
  expect_invalid(run(op, reshape_attrs({0, 3}), {tv(F, {2, 3})}), op, "has 6 elements");
  // Symbols: dim 0 takes symbol 2 (its literal is ignored), dim 1 is inferred.
  expect_dims(run(op, reshape_attrs({1, -1}, {2, 0}), {tv(F, {3, 2, 4})}, {5, 6}), {6, 4});
  expect_dims(run(op, reshape_attrs({99, 4}, {1, 0}), {tv(F, {3, 2, 4})}, {6}), {6, 4});
  expect_invalid(run(op, reshape_attrs({1, 4}, {1, 0}), {tv(F, {3, 2, 4})}, {5}), op,
                 "24 elements");
  expect_invalid(run(op, reshape_attrs({1, 4}, {3, 0}), {tv(F, {3, 2, 4})}, {6, 6}), op,
                 "symbol 3 but only 2");
  expect_invalid(run(op, reshape_attrs({1, -1}, {1, 0}), {tv(F, {3, 2, 4})}, {-6}), op,
                 "negative value -6");
}

TEST_F(OpInfoTest, ReshapeErrors) {
  const OpCode op = OpCode::Reshape;
  expect_invalid(run(op, reshape_attrs({-1, -1}), {tv(F, {2, 3})}), op, "-1 at both");
  expect_invalid(run(op, reshape_attrs({-2, 3}), {tv(F, {2, 3})}), op, "invalid target dim -2");
  expect_invalid(run(op, reshape_attrs({5, -1}), {tv(F, {2, 3})}), op, "cannot infer");
  expect_invalid(run(op, reshape_attrs({0, -1}), {tv(F, {0, 3})}), op, "cannot infer");
  expect_invalid(run(op, reshape_attrs({7}), {tv(F, {2, 3})}), op, "target [7]");
  expect_invalid(run(op, reshape_attrs({kI64Max, kI64Max}), {tv(F, {2, 3})}), op, "overflows");
  OpAttrs a = reshape_attrs({1});
  a.count = 9;
  expect_invalid(run(op, a, {tv(F, {1})}), op, "rank 9");
}

// ---- Transpose / Concat
// --------------------------------------------------------------------------

OpAttrs perm_attrs(std::initializer_list<int> perm) {
  OpAttrs a;
  a.kind = AttrKind::Permute;
  a.count = static_cast<uint8_t>(perm.size());
  int i = 0;
  for (int p : perm) a.perm[i++] = p;
  return a;
}

TEST_F(OpInfoTest, Transpose) {
  const OpCode op = OpCode::Transpose;
  expect_dims(run(op, perm_attrs({2, 0, 1}), {tv(F, {2, 3, 4})}), {4, 2, 3});
  expect_dims(run(op, perm_attrs({}), {tv(F, {})}), {});
  expect_dims(run(op, perm_attrs({1, 0}), {tv(ScalarType::UE4M3, {5, 7})}), {7, 5},
              ScalarType::UE4M3);
  expect_invalid(run(op, perm_attrs({0, 0, 1}), {tv(F, {2, 3, 4})}), op, "permutation");
  expect_invalid(run(op, perm_attrs({0, 3, 1}), {tv(F, {2, 3, 4})}), op, "permutation");
  expect_invalid(run(op, perm_attrs({0, -1, 1}), {tv(F, {2, 3, 4})}), op, "permutation");
  expect_invalid(run(op, perm_attrs({1, 0}), {tv(F, {2, 3, 4})}), op, "2 entries for rank 3");
}

TEST_F(OpInfoTest, Concat) {
  const OpCode op = OpCode::Concat;
  OpAttrs a;
  a.kind = AttrKind::Axis;
  expect_dims(run(op, a, {tv(F, {2, 3}), tv(F, {1, 3}), tv(F, {0, 3})}), {3, 3});
  a.axis = -1;
  expect_dims(run(op, a, {tv(F, {2, 3}), tv(F, {2, 5})}), {2, 8});
  expect_dims(run(op, a, {tv(F, {2, 3})}), {2, 3});
  std::vector<TensorView> fifteen(15, tv(ScalarType::I8, {1, 2}));
  expect_dims(run(op, a, fifteen), {1, 30}, ScalarType::I8);
  std::vector<TensorView> sixteen(16, tv(ScalarType::I8, {1, 2}));
  expect_invalid(run(op, a, sixteen), op, "got 16");
  expect_invalid(run(op, a, {}), op, "got 0");
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(F, {3, 3})}), op, "input 1 shape [3, 3]");
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(F, {2, 3, 1})}), op, "input 1 shape");
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(ScalarType::I32, {2, 3})}), op, "i32");
  a.axis = 2;
  expect_invalid(run(op, a, {tv(F, {2, 3}), tv(F, {2, 3})}), op, "axis 2 out of range");
  a.axis = 0;
  expect_invalid(run(op, a, {tv(F, {}), tv(F, {})}), op, "out of range for rank 0");
  expect_invalid(run(op, a, {tv(F, {kI64Max / 5, 1}), tv(F, {kI64Max / 5, 1})}), op, "overflows");
}

// ---- Slice
// ---------------------------------------------------------------------------------------

OpAttrs slice_attrs(std::initializer_list<int> axes, std::initializer_list<int64_t> starts,
                    std::initializer_list<int64_t> ends, std::initializer_list<int64_t> steps) {
  OpAttrs a;
  a.kind = AttrKind::Slice;
  a.count = static_cast<uint8_t>(axes.size());
  int i = 0;
  for (int v : axes) a.axes[i++] = v;
  i = 0;
  for (int64_t v : starts) a.starts[i++] = v;
  i = 0;
  for (int64_t v : ends) a.ends[i++] = v;
  i = 0;
  for (int64_t v : steps) a.steps[i++] = v;
  return a;
}

TEST_F(OpInfoTest, SliceClamping) {
  const OpCode op = OpCode::Slice;
  const TensorView x = tv(F, {10});
  expect_dims(run(op, slice_attrs({0}, {1}, {8}, {2}), {x}), {4});         // 1 3 5 7
  expect_dims(run(op, slice_attrs({0}, {-3}, {kI64Max}, {1}), {x}), {3});  // 7 8 9
  expect_dims(run(op, slice_attrs({0}, {-100}, {100}, {1}), {x}), {10});
  expect_dims(run(op, slice_attrs({0}, {kI64Min}, {kI64Max}, {3}), {x}), {4});
  expect_dims(run(op, slice_attrs({0}, {5}, {2}, {1}), {x}), {0});
  expect_dims(run(op, slice_attrs({0}, {10}, {20}, {1}), {x}), {0});
  // Negative steps: start clamps to dim - 1, end to -1 ("before the first element").
  expect_dims(run(op, slice_attrs({0}, {-1}, {kI64Min}, {-1}), {x}), {10});
  expect_dims(run(op, slice_attrs({0}, {100}, {-100}, {-3}), {x}), {4});  // 9 6 3 0
  expect_dims(run(op, slice_attrs({0}, {4}, {0}, {-2}), {x}), {2});       // 4 2
  expect_dims(run(op, slice_attrs({0}, {2}, {5}, {-1}), {x}), {0});
  expect_dims(run(op, slice_attrs({0}, {kI64Max}, {kI64Min}, {kI64Min}), {x}), {1});
  expect_dims(run(op, slice_attrs({0}, {0}, {kI64Max}, {kI64Max}), {x}), {1});
  expect_dims(run(op, slice_attrs({0}, {0}, {5}, {1}), {tv(F, {0})}), {0});
  expect_dims(run(op, slice_attrs({0}, {-1}, {kI64Min}, {-1}), {tv(F, {0})}), {0});
  // Several axes, negative axis numbers, untouched axes keep their size.
  expect_dims(run(op, slice_attrs({-1, 0}, {-3, -100}, {1000, kI64Max}, {1, 2}),
                  {tv(ScalarType::I64, {3, 4, 5})}),
              {2, 4, 3}, ScalarType::I64);
  expect_dims(run(op, slice_attrs({}, {}, {}, {}), {tv(F, {2, 3})}), {2, 3});
}

TEST_F(OpInfoTest, SliceEndFromASymbol) {
  const OpCode op = OpCode::Slice;
  OpAttrs a = slice_attrs({1}, {0}, {16}, {1});  // ends[0] holds the symbol's max
  a.ends_sym[0] = 2;
  const TensorView table = tv(ScalarType::I64, {1, 16});
  expect_dims(run(op, a, {table}, {4, 9}), {1, 9}, ScalarType::I64);
  expect_dims(run(op, a, {table}, {4, 0}), {1, 0}, ScalarType::I64);
  expect_dims(run(op, a, {table}, {4, 40}), {1, 16}, ScalarType::I64);  // clamped like any end
  a.starts[0] = 3;
  expect_dims(run(op, a, {table}, {4, 9}), {1, 6}, ScalarType::I64);
  expect_invalid(run(op, a, {table}, {4}), op, "names symbol 2 but only 1 are bound");
}

TEST_F(OpInfoTest, SliceErrors) {
  const OpCode op = OpCode::Slice;
  const TensorView x = tv(F, {4, 6});
  expect_invalid(run(op, slice_attrs({0}, {0}, {4}, {0}), {x}), op, "step 0");
  expect_invalid(run(op, slice_attrs({1, -1}, {0, 0}, {4, 4}, {1, 1}), {x}), op, "axis 1 repeated");
  expect_invalid(run(op, slice_attrs({2}, {0}, {4}, {1}), {x}), op, "axis 2 out of range");
  expect_invalid(run(op, slice_attrs({-3}, {0}, {4}, {1}), {x}), op, "axis -3 out of range");
  expect_invalid(run(op, slice_attrs({0, 1, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}), {x}), op,
                 "3 axes for rank 2");
}

OpAttrs pad_attrs(std::initializer_list<int64_t> pads, PadMode mode = PadMode::Constant,
                  float value = 0.0f) {
  OpAttrs a;
  a.kind = AttrKind::Pad;
  a.count = static_cast<uint8_t>(pads.size() / 2);
  int i = 0;
  for (int64_t p : pads) a.pads[i++] = p;
  a.pad_mode = mode;
  a.pad_value = value;
  return a;
}

TEST_F(OpInfoTest, Pad) {
  const OpCode op = OpCode::Pad;
  expect_dims(run(op, pad_attrs({0, 0, 1, 2, 0, 0, 3, 4}), {tv(F, {1, 3, 5, 5})}),
              {1, 3, 9, 11});
  // Negative pads crop, down to an empty axis.
  expect_dims(run(op, pad_attrs({-1, 2, -2, -3}), {tv(ScalarType::I8, {5, 6})}), {2, 5},
              ScalarType::I8);
  expect_dims(run(op, pad_attrs({-2, -3}), {tv(F, {5})}), {0});
  expect_dims(run(op, pad_attrs({}), {tv(F, {})}), {});
  // Constant padding of an empty axis is fine; Edge and Reflect need data to copy.
  expect_dims(run(op, pad_attrs({1, 2}), {tv(F, {0})}), {3});
  expect_dims(run(op, pad_attrs({0, 0}, PadMode::Edge), {tv(F, {0})}), {0});
  expect_invalid(run(op, pad_attrs({1, 0}, PadMode::Edge), {tv(F, {0})}), op,
                 "edge padding of empty axis 0");
  expect_dims(run(op, pad_attrs({3, 1}, PadMode::Edge), {tv(F, {1})}), {5});
  // Reflect: pads up to dim - 1 (the border is not repeated).
  expect_dims(run(op, pad_attrs({2, 2}, PadMode::Reflect), {tv(F, {3})}), {7});
  expect_dims(run(op, pad_attrs({-1, 2}, PadMode::Reflect), {tv(F, {3})}), {4});
  expect_invalid(run(op, pad_attrs({3, 0}, PadMode::Reflect), {tv(F, {3})}), op,
                 "reflect pads 3, 0 on axis 0 must be < its size 3");
  expect_invalid(run(op, pad_attrs({0, 1}, PadMode::Reflect), {tv(F, {1})}), op, "reflect");
  expect_invalid(run(op, pad_attrs({0, 1}, PadMode::Reflect), {tv(F, {0})}), op, "reflect");
  expect_invalid(run(op, pad_attrs({-3, -3}), {tv(F, {5})}), op,
                 "axis 0 of size 5 with pads -3, -3");
  expect_invalid(run(op, pad_attrs({1, 1}), {tv(F, {2, 2})}), op,
                 "pads cover rank 1 but the input has rank 2");
  expect_invalid(run(op, pad_attrs({1, 1}, static_cast<PadMode>(7)), {tv(F, {2})}), op,
                 "invalid mode 7");
  expect_invalid(run(op, pad_attrs({1, 1}, PadMode::Invalid), {tv(F, {2})}), op, "mode 0");
  // Hostile pads: no overflow in dim + begin + end, and the padded size must fit.
  expect_invalid(run(op, pad_attrs({kI64Max, 1}), {tv(F, {1})}), op, "overflowing");
  expect_invalid(run(op, pad_attrs({kI64Min, kI64Min}), {tv(F, {1})}), op, "negative");
  expect_invalid(run(op, pad_attrs({kI64Max, kI64Min}), {tv(F, {1})}), op, "negative");
  expect_dims(run(op, pad_attrs({kI64Max - 5, -kI64Max + 3}), {tv(ScalarType::U8, {4})}), {2},
              ScalarType::U8);
  expect_invalid(run(op, pad_attrs({kI64Max / 2, 0}), {tv(F, {1})}), op, "byte size overflows");
  expect_invalid(run(op, pad_attrs({kI64Max / 2, 0, 0, 4}), {tv(F, {1, 1})}), op, "overflows");
  OpAttrs hostile = pad_attrs({1, 1});
  hostile.count = 255;
  expect_invalid(run(op, hostile, {tv(F, {2})}), op, "rank 255");
}

TEST_F(OpInfoTest, Gather) {
  const OpCode op = OpCode::Gather;
  const ScalarType I32 = ScalarType::I32, I64 = ScalarType::I64;
  OpAttrs a;
  a.kind = AttrKind::Axis;
  expect_dims(run(op, a, {tv(F, {5, 4}), tv(I64, {2, 3})}), {2, 3, 4});
  a.axis = 1;
  expect_dims(run(op, a, {tv(ScalarType::F16, {2, 5, 3}), tv(I32, {7})}), {2, 7, 3},
              ScalarType::F16);
  a.axis = -1;
  expect_dims(run(op, a, {tv(F, {2, 5}), tv(I32, {})}), {2});  // scalar index drops the axis
  expect_dims(run(op, a, {tv(I64, {2, 0}), tv(I32, {3})}), {2, 3}, I64);  // indices into nothing
  a.axis = 0;
  expect_dims(run(op, a, {tv(F, {4}), tv(I64, {0, 2})}), {0, 2});
  // Output rank data.rank - 1 + indices.rank must fit.
  expect_dims(run(op, a, {tv(F, {4}), tv(I32, {1, 1, 1, 1, 1, 1, 1, 1})}),
              {1, 1, 1, 1, 1, 1, 1, 1});
  expect_invalid(run(op, a, {tv(F, {4, 2}), tv(I32, {1, 1, 1, 1, 1, 1, 1, 1})}), op,
                 "output rank 9");
  expect_invalid(run(op, a, {tv(F, {4}), tv(F, {2})}), op, "indices must be i32 or i64, got f32");
  expect_invalid(run(op, a, {tv(F, {4}), tv(ScalarType::I16, {2})}), op, "got i16");
  expect_invalid(run(op, a, {tv(F, {}), tv(I32, {2})}), op, "axis 0 out of range for rank 0");
  a.axis = 2;
  expect_invalid(run(op, a, {tv(F, {4, 2}), tv(I32, {2})}), op, "axis 2 out of range for rank 2");
  a.axis = -3;
  expect_invalid(run(op, a, {tv(F, {4, 2}), tv(I32, {2})}), op, "axis -3");
  a.axis = 0;
  expect_invalid(run(op, a, {tv(F, {4})}), op, "expected 2 to 2 inputs, got 1");
  expect_invalid(run(op, a, {tv(F, {2, kI64Max / 8}), tv(I32, {16})}), op, "overflows");
}

TEST_F(OpInfoTest, Expand) {
  const OpCode op = OpCode::Expand;
  expect_dims(run(op, reshape_attrs({2, 3, 4}), {tv(F, {3, 1})}), {2, 3, 4});
  expect_dims(run(op, reshape_attrs({1, 1}), {tv(F, {3, 4})}), {3, 4});  // 1 in the target keeps
  expect_dims(run(op, reshape_attrs({4}), {tv(F, {2, 1})}), {2, 4});     // target rank < input
  expect_dims(run(op, reshape_attrs({}), {tv(F, {2})}), {2});
  expect_dims(run(op, reshape_attrs({0, 3}), {tv(ScalarType::Bool, {1, 3})}), {0, 3},
              ScalarType::Bool);
  expect_dims(run(op, reshape_attrs({1, 5}, {0, 2}), {tv(F, {1})}, {9, 6}), {1, 6});
  expect_invalid(run(op, reshape_attrs({-1, 3}), {tv(F, {3})}), op, "invalid target dim -1 at 0");
  expect_invalid(run(op, reshape_attrs({2, 3}), {tv(F, {4})}), op,
                 "input [4] does not broadcast to [2, 3]");
  expect_invalid(run(op, reshape_attrs({5}, {2}), {tv(F, {1})}, {7}), op,
                 "symbol 2 but only 1");
  expect_invalid(run(op, reshape_attrs({5}, {1}), {tv(F, {1})}, {-3}), op,
                 "negative value -3");
  expect_invalid(run(op, reshape_attrs({kI64Max, 2}), {tv(F, {1})}), op, "overflows");
  OpAttrs a = reshape_attrs({1});
  a.count = 9;
  expect_invalid(run(op, a, {tv(F, {1})}), op, "target rank 9");
}

}  // namespace
}  // namespace ember
