// runtime/core/sample_draw.h: the sample op's inverse CDF on rows whose weights are exact in double
// (z - m in {0, ln 1 = 0} and -inf), so every expected id and logprob is known in closed form.
#include "runtime/core/sample_draw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace ember {
namespace {

struct Draw {
  int32_t id;
  float logprob;
};

Draw RunDraw(const std::vector<float>& z, double m, double u) {
  Draw d{-2, 0.0f};
  sample_inverse_cdf(z.data(), static_cast<int64_t>(z.size()), m, u, &d.id, &d.logprob);
  return d;
}

TEST(SampleDrawTest, WalksKeptIdsInAscendingOrder) {
  // Four equal kept weights at ids 1, 2, 4, 6: u picks the (floor(4u) + 1)-th kept id.
  const float ninf = -INFINITY;
  const std::vector<float> z = {ninf, 0.0f, 0.0f, ninf, 0.0f, ninf, 0.0f};
  const int32_t expected[] = {1, 1, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 8; ++i) {
    const double u = i / 8.0;
    const Draw d = RunDraw(z, 0.0, u);
    EXPECT_EQ(d.id, expected[i]) << "u = " << u;
    EXPECT_EQ(d.logprob, static_cast<float>(-std::log(4.0))) << "u = " << u;
  }
}

TEST(SampleDrawTest, ARunningSumEqualToTheTargetDoesNotPick) {
  // u * sum = 1 exactly after the first kept id: "exceeds" is strict, so the second is chosen.
  const Draw d = RunDraw({0.0f, 0.0f}, 0.0, 0.5);
  EXPECT_EQ(d.id, 1);
}

TEST(SampleDrawTest, OneKeptIdIsChosenWithLogprobZero) {
  const float ninf = -INFINITY;
  for (double u : {0.0, 0.5, 0.9999999999999999}) {
    const Draw d = RunDraw({ninf, ninf, 3.5f, ninf}, 3.5, u);
    EXPECT_EQ(d.id, 2);
    EXPECT_EQ(d.logprob, 0.0f);
  }
}

TEST(SampleDrawTest, NoPickFallsBackToTheLastKeptId) {
  // u = 1 is outside [0, 1), but it is what rounding can leave: the running sum never exceeds the
  // target, so the last kept id is taken.
  const float ninf = -INFINITY;
  const Draw d = RunDraw({0.0f, 0.0f, ninf}, 0.0, 1.0);
  EXPECT_EQ(d.id, 1);
  EXPECT_EQ(d.logprob, static_cast<float>(-std::log(2.0)));
}

}  // namespace
}  // namespace ember
