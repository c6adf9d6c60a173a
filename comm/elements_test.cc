#include "comm/elements.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(Half, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the tie rounds to infinity
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);  // a tie: to even, zero
  EXPECT_EQ(FloatToHalf(0x1.8p-25f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1p-14f), 0x0400);           // the smallest normal
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3c00);    // a tie: to even
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.8p-11f), 0x3c01);  // 0.75 ulp: up
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.8p-10f), 0x3c02);  // 1.5 ulp: a tie, even
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_EQ(HalfToFloat(0x3555), 0x1.554p-2f);
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfToFloat(0xfc00), -INFINITY);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToHalf(f), h) << h;
    }
  }
}

#ifdef __FLT16_MANT_DIG__
// Where the compiler has _Float16 (GCC on x86-64): the same bits as its
// conversions for every half and for floats across the whole range.
TEST(Half, MatchesTheCompilersFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    _Float16 x;
    std::memcpy(&x, &bits, sizeof x);
    const float want = static_cast<float>(x);
    const float got = HalfToFloat(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(Bits(got), Bits(want)) << h;
    }
  }
  int checked = 0;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 997) {
    const float f = FromBits(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    const _Float16 want = static_cast<_Float16>(f);
    uint16_t want_bits;
    std::memcpy(&want_bits, &want, sizeof want_bits);
    ASSERT_EQ(FloatToHalf(f), want_bits) << std::hexfloat << f;
    ++checked;
  }
  EXPECT_GT(checked, 4000000);
}
#endif

}  // namespace
}  // namespace ringmaster
