// kernels/cpu resize and conv_transpose2d (issue 17) against their reference twins on every target,
// 1 and 3 threads bitwise equal.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/reference/ops.h"
#include "tests/kernels/cpu/test_util.h"

namespace ember::kernels::cpu_test {
namespace {

namespace ref = ::ember::kernels::reference;

OpAttrs ResizeAttrs(ResizeMode mode, ResizeCoord coord, ResizeNearest nearest, const std::vector<int64_t>& sizes,
                    const std::vector<float>& scales) {
  OpAttrs a;
  a.kind = AttrKind::Resize;
  a.resize_mode = mode;
  a.resize_coord = coord;
  a.resize_nearest = nearest;
  a.count = static_cast<uint8_t>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    a.shape[i] = sizes[i];
    a.resize_scales[i] = scales[i];
  }
  return a;
}

struct ResizeCase {
  std::vector<int64_t> in, out;
  std::vector<float> scales;
};

// NCHW shapes around the vector widths: x2 (the doubling path), identity widths, odd ratios,
// downsampling, widths over one 256-column table chunk, a rank-3 "CHW" and a resized channel dim
// (the generic path).
std::vector<ResizeCase> ResizeCases() {
  std::vector<ResizeCase> cases;
  for (int64_t w : {1, 3, 4, 7, 8, 9, 15, 16, 17, 33}) {
    cases.push_back({{1, 2, 3, w}, {1, 2, 6, 2 * w}, {1, 1, 2, 2}});
  }
  cases.push_back({{2, 3, 5, 7}, {2, 3, 11, 7}, {1, 1, 11.0f / 5, 1}});
  cases.push_back({{1, 2, 4, 9}, {1, 2, 4, 20}, {1, 1, 1, 20.0f / 9}});
  cases.push_back({{1, 1, 9, 13}, {1, 1, 4, 5}, {1, 1, 4.0f / 9, 5.0f / 13}});
  cases.push_back({{1, 2, 3, 150}, {1, 2, 5, 300}, {1, 1, 5.0f / 3, 2}});
  cases.push_back({{1, 1, 2, 300}, {1, 1, 3, 601}, {1, 1, 1.5f, 601.0f / 300}});
  cases.push_back({{4, 6, 10}, {4, 12, 21}, {1, 2, 2.1f}});
  cases.push_back({{1, 2, 3, 4}, {1, 4, 6, 8}, {1, 2, 2, 2}});
  cases.push_back({{1, 16, 20, 20}, {1, 16, 40, 40}, {1, 1, 2, 2}});  // large enough for 3 threads
  return cases;
}

using ResizeTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(ResizeTest);

TEST_P(ResizeTest, NearestEveryModeIsExact) {
  uint32_t seed = 1;
  for (const ResizeCase& c : ResizeCases()) {
    Tensor x = Random(c.in, seed++, -3.0f, 3.0f);
    for (ResizeCoord coord : {ResizeCoord::HalfPixel, ResizeCoord::AlignCorners, ResizeCoord::Asymmetric,
                              ResizeCoord::PytorchHalfPixel, ResizeCoord::HalfPixelSymmetric}) {
      for (ResizeNearest nearest : {ResizeNearest::RoundPreferFloor, ResizeNearest::RoundPreferCeil,
                                    ResizeNearest::Floor, ResizeNearest::Ceil}) {
        SCOPED_TRACE(DimsText(x.view) + " coord " + std::to_string(int(coord)) + " nearest " +
                     std::to_string(int(nearest)));
        const OpAttrs a = ResizeAttrs(ResizeMode::Nearest, coord, nearest, c.out, c.scales);
        CheckTwin(OpCode::Resize, cpu::resize, ref::resize, a, {x.view}, kExact, true);
      }
    }
  }
}

TEST_P(ResizeTest, LinearAndCubicWithinF32) {
  uint32_t seed = 100;
  for (const ResizeCase& c : ResizeCases()) {
    Tensor x = Random(c.in, seed++, -3.0f, 3.0f);
    for (ResizeMode mode : {ResizeMode::Linear, ResizeMode::Cubic}) {
      for (ResizeCoord coord : {ResizeCoord::HalfPixel, ResizeCoord::AlignCorners, ResizeCoord::Asymmetric,
                                ResizeCoord::PytorchHalfPixel, ResizeCoord::HalfPixelSymmetric}) {
        SCOPED_TRACE(DimsText(x.view) + " mode " + std::to_string(int(mode)) + " coord " + std::to_string(int(coord)));
        const OpAttrs a = ResizeAttrs(mode, coord, ResizeNearest::RoundPreferFloor, c.out, c.scales);
        CheckTwin(OpCode::Resize, cpu::resize, ref::resize, a, {x.view}, Tolerance{2e-6f, 1e-5f}, true);
      }
    }
  }
}

TEST_P(ResizeTest, SpecialValuesReachTheSameOutputs) {
  // NaN and infinities at the edges and inside: linear reads every tap the reference reads, so NaN,
  // inf and inf * 0 = NaN land on the same outputs; nearest copies the bits (payload, -0).
  Tensor x = Random({1, 2, 5, 19}, 7);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -0.0f};
  for (size_t i = 0; i < x.numel(); i += 7) x.f()[i] = specials[(i / 7) % 4];
  for (ResizeMode mode : {ResizeMode::Nearest, ResizeMode::Linear}) {
    const OpAttrs a = ResizeAttrs(mode, ResizeCoord::HalfPixel, ResizeNearest::RoundPreferFloor, {1, 2, 10, 38},
                                  {1, 1, 2, 2});
    CheckTwin(OpCode::Resize, cpu::resize, ref::resize, a, {x.view},
              mode == ResizeMode::Nearest ? kExact : Tolerance{2e-6f, 1e-5f}, true);
  }
}

TEST_P(ResizeTest, EmptyOutputAndIdentity) {
  Tensor x = Random({0, 3, 4, 4}, 3);
  CheckTwin(OpCode::Resize, cpu::resize, ref::resize,
            ResizeAttrs(ResizeMode::Linear, ResizeCoord::HalfPixel, ResizeNearest::Floor, {0, 3, 8, 8}, {1, 1, 2, 2}),
            {x.view}, kExact);
  Tensor y = Random({1, 3, 4, 5}, 4);
  // Same sizes with scales other than 1: a copy, as onnxruntime.
  Tensor out = CheckTwin(OpCode::Resize, cpu::resize, ref::resize,
                         ResizeAttrs(ResizeMode::Cubic, ResizeCoord::Asymmetric, ResizeNearest::Floor, {1, 3, 4, 5},
                                     {1, 1, 1.1f, 1.2f}),
                         {y.view}, kExact);
  EXPECT_TRUE(BytesEqual(out, y));
}

struct ConvTCase {
  const char* name;
  int64_t n, c, h, w, o, kh, kw;
  int32_t stride[2], padding[4], dilation[2], output_padding[2], groups;
  bool bias;
};

const ConvTCase kConvTCases[] = {
    {"k2 s2 (PP-OCR)", 1, 8, 9, 13, 4, 2, 2, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1, true},
    {"k3 s2 pad1 outpad1", 2, 3, 5, 17, 5, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, true},
    {"k4 s2 pad1", 1, 4, 8, 8, 3, 4, 4, {2, 2}, {1, 1, 1, 1}, {1, 1}, {0, 0}, 1, false},
    {"k3 s1", 1, 3, 6, 33, 2, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1, true},
    {"groups dilation asym", 1, 6, 5, 9, 6, 3, 2, {1, 3}, {1, 2, 0, 1}, {2, 2}, {0, 2}, 3, true},
    {"depthwise s2", 1, 4, 7, 7, 4, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 4, true},
    {"1-D as 2-D", 2, 3, 1, 40, 4, 1, 5, {1, 3}, {0, 2, 0, 1}, {1, 1}, {0, 0}, 1, true},
    {"wide rows over one chunk", 1, 2, 2, 700, 2, 3, 3, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1, true},
    {"stride > kernel", 1, 2, 4, 5, 2, 2, 2, {3, 4}, {0, 0, 0, 0}, {1, 1}, {2, 1}, 1, true},
    {"stride 600 (per-element path)", 1, 1, 1, 3, 2, 1, 2, {1, 600}, {0, 0, 0, 0}, {1, 1}, {0, 5}, 1, true},
    {"large", 1, 16, 20, 20, 16, 2, 2, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1, true},
};

using ConvTransposeTest = TargetTest;
EMBER_INSTANTIATE_TARGETS(ConvTransposeTest);

OpAttrs ConvTAttrs(const ConvTCase& c) {
  OpAttrs a;
  a.kind = AttrKind::Conv2d;
  for (int i = 0; i < 2; ++i) {
    a.stride[i] = c.stride[i];
    a.dilation[i] = c.dilation[i];
    a.output_padding[i] = c.output_padding[i];
  }
  for (int i = 0; i < 4; ++i) a.padding[i] = c.padding[i];
  a.groups = c.groups;
  return a;
}

TEST_P(ConvTransposeTest, MatchesReference) {
  uint32_t seed = 11;
  for (const ConvTCase& c : kConvTCases) {
    SCOPED_TRACE(c.name);
    Tensor x = Random({c.n, c.c, c.h, c.w}, seed++);
    Tensor w = Random({c.c, c.o / c.groups, c.kh, c.kw}, seed++);
    Tensor b = Random({c.o}, seed++);
    TensorView absent;
    CheckTwin(OpCode::ConvTranspose2d, cpu::conv_transpose2d, ref::conv_transpose2d, ConvTAttrs(c),
              {x.view, w.view, c.bias ? b.view : absent}, Tolerance{1e-5f, 1e-5f}, true);
  }
}

TEST_P(ConvTransposeTest, ClampAndSpecialValues) {
  const ConvTCase& c = kConvTCases[1];
  Tensor x = Random({c.n, c.c, c.h, c.w}, 5, -2.0f, 2.0f);
  x.f()[3] = std::numeric_limits<float>::quiet_NaN();
  x.f()[40] = std::numeric_limits<float>::infinity();
  Tensor w = Random({c.c, c.o, c.kh, c.kw}, 6);
  Tensor b = Random({c.o}, 7);
  OpAttrs a = ConvTAttrs(c);
  a.out_min = 0.0f;
  a.out_max = 0.5f;
  Tensor out = CheckTwin(OpCode::ConvTranspose2d, cpu::conv_transpose2d, ref::conv_transpose2d, a,
                         {x.view, w.view, b.view}, Tolerance{1e-5f, 1e-5f}, true);
  int nans = 0;
  for (size_t i = 0; i < out.numel(); ++i) {
    if (std::isnan(out.f()[i])) {
      ++nans;
    } else {
      EXPECT_TRUE(out.f()[i] >= 0.0f && out.f()[i] <= 0.5f) << i << ": " << out.f()[i];
    }
  }
  EXPECT_GT(nans, 0);  // the NaN input reaches its outputs through the clamp
}

}  // namespace
}  // namespace ember::kernels::cpu_test
