// The 16-bit float conversions of reduce/half_bits.h against float16_reference.h, whose
// encoders are written from the formats' definitions with exact double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "float16_reference.h"
#include "reduce/half_bits.h"

namespace ring {
namespace {

bool sameFloat(double x, double y) {
  return (std::isnan(x) && std::isnan(y)) || (x == y && std::signbit(x) == std::signbit(y));
}

// The reference itself, pinned to values fixed by the IEEE binary16 / bfloat16 formats.
TEST(HalfBits, ReferenceMatchesKnownEncodings) {
  EXPECT_EQ(ref::halfBits(1.0f), 0x3c00);
  EXPECT_EQ(ref::halfBits(-2.0f), 0xc000);
  EXPECT_EQ(ref::halfBits(65504.0f), 0x7bff);
  EXPECT_EQ(ref::halfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(ref::halfBits(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(ref::bfloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(ref::bfloat16Bits(-2.0f), 0xc000);
  EXPECT_EQ(ref::halfValue(0x3555), 0.333251953125);
}

// Every half and bfloat16 value is exact in float, so widening and narrowing again must give
// back the same bits for all 65536 patterns except NaNs (whose payload may change).
TEST(HalfBits, EveryNonNaNPatternRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const double halfWant = ref::halfValue(b), bfWant = ref::bfloat16Value(b);
    const float h = toFloat(Half{b}), bf = toFloat(BFloat16{b});
    if (std::isnan(halfWant)) {
      EXPECT_TRUE(std::isnan(h)) << std::hex << bits;
      EXPECT_TRUE(std::isnan(ref::halfValue(toHalf(h).bits))) << std::hex << bits;
    } else {
      ASSERT_TRUE(sameFloat(h, halfWant)) << "half 0x" << std::hex << bits << ": " << h;
      ASSERT_EQ(toHalf(h).bits, b) << "half 0x" << std::hex << bits;
    }
    if (std::isnan(bfWant)) {
      EXPECT_TRUE(std::isnan(bf)) << std::hex << bits;
      EXPECT_TRUE(std::isnan(ref::bfloat16Value(toBFloat16(bf).bits))) << std::hex << bits;
    } else {
      ASSERT_TRUE(sameFloat(bf, bfWant)) << "bfloat16 0x" << std::hex << bits << ": " << bf;
      ASSERT_EQ(toBFloat16(bf).bits, b) << "bfloat16 0x" << std::hex << bits;
    }
  }
}

// Values that sit exactly between two neighbours, just off them, at the subnormal and overflow
// boundaries, and a deterministic spread of floats: narrowing must round to nearest, ties to
// even, exactly like the reference.
std::vector<float> roundingProbes() {
  std::vector<float> v;
  for (int e : {0, -14, -15, -20, -24, -25, 15, 5, -133, -126, 127}) {
    for (double m : {1.0, 1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11),
                     1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8), 1.5, 1.75,
                     1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -20), 2.0 - std::ldexp(1.0, -23)}) {
      for (double sign : {1.0, -1.0}) v.push_back(static_cast<float>(sign * std::ldexp(m, e)));
    }
  }
  for (float x : {65504.0f, 65519.0f, 65520.0f, 65535.0f, 1e10f, std::ldexp(1.0f, -14) -
                  std::ldexp(1.0f, -25), std::ldexp(3.0f, -25), INFINITY, -INFINITY, 0.0f, -0.0f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()}) {
    v.push_back(x);
  }
  uint64_t state = 0x9e3779b97f4a7c15ull;  // splitmix64: reproducible, no <random> state
  for (int i = 0; i < 200000; ++i) {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    // Half of the probes keep the exponent near half's range, the rest are any float.
    uint32_t bits = static_cast<uint32_t>(z);
    if (i % 2 == 0) bits = (bits & 0x807fffffu) | ((100u + static_cast<uint32_t>(z >> 40) % 48u) << 23);
    v.push_back(bitsToFloat(bits));
  }
  return v;
}

TEST(HalfBits, NarrowingRoundsToNearestEven) {
  for (float f : roundingProbes()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(ref::halfValue(toHalf(f).bits)));
      EXPECT_TRUE(std::isnan(ref::bfloat16Value(toBFloat16(f).bits)));
      continue;
    }
    ASSERT_EQ(toHalf(f).bits, ref::halfBits(f)) << "half of " << f << " (float bits 0x"
                                                << std::hex << floatToBits(f) << ")";
    ASSERT_EQ(toBFloat16(f).bits, ref::bfloat16Bits(f)) << "bfloat16 of " << f << " (0x"
                                                        << std::hex << floatToBits(f) << ")";
  }
}

}  // namespace
}  // namespace ring
