// The dtypes added after the first ten: uint16/uint32/uint64 (C's unsigned wrap-around) and
// torch's two 8-bit floats, checked through the executor's type-erased table in every build this
// CPU serves, against references written from the definitions (float16_reference.h's float8
// encoder finds a value's pattern among the 256 by its decoded value, no bit tricks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/types.h"
#include "combine_builds.h"
#include "float16_reference.h"
#include "reduce/float8_bits.h"
#include "reduce/reduce_table.h"

namespace ring {
namespace {

// ---- the conversions --------------------------------------------------------------------------

// The reference pinned to values the formats fix (OCP 8-bit floating point specification,
// and torch.finfo(torch.float8_e4m3fn / float8_e5m2)).
TEST(Float8Bits, ReferenceMatchesTheFormatsDefinitions) {
  EXPECT_EQ(ref::float8Bits(1.0f, ref::kE4M3), 0x38);
  EXPECT_EQ(ref::float8Bits(-2.0f, ref::kE4M3), 0xc0);
  EXPECT_EQ(ref::float8Bits(448.0f, ref::kE4M3), 0x7e);                 // finfo.max
  EXPECT_EQ(ref::float8Bits(std::ldexp(1.0f, -6), ref::kE4M3), 0x08);   // finfo.tiny
  EXPECT_EQ(ref::float8Bits(std::ldexp(1.0f, -9), ref::kE4M3), 0x01);   // smallest subnormal
  EXPECT_EQ(ref::float8Bits(1.0f, ref::kE5M2), 0x3c);
  EXPECT_EQ(ref::float8Bits(57344.0f, ref::kE5M2), 0x7b);               // finfo.max
  EXPECT_EQ(ref::float8Bits(std::ldexp(1.0f, -14), ref::kE5M2), 0x04);  // finfo.tiny
  EXPECT_EQ(ref::float8Bits(std::ldexp(1.0f, -16), ref::kE5M2), 0x01);
  EXPECT_EQ(ref::float8Bits(-INFINITY, ref::kE5M2), 0xfc);
  EXPECT_TRUE(std::isnan(ref::float8Value(0x7f, ref::kE4M3)));
  EXPECT_EQ(ref::float8Value(0x78, ref::kE4M3), 256.0);  // e4m3fn's exponent 15 is finite
  EXPECT_EQ(ref::float8Value(0x7c, ref::kE4M3), 384.0);
}

// Every pattern widens to its value, and narrows back to itself (NaNs: to a NaN).
TEST(Float8Bits, EveryPatternWidensToItsValueAndBack) {
  for (int b = 0; b < 256; ++b) {
    const auto bits = static_cast<uint8_t>(b);
    const double e4 = ref::float8Value(bits, ref::kE4M3), e5 = ref::float8Value(bits, ref::kE5M2);
    const float f4 = toFloat(Float8E4M3{bits}), f5 = toFloat(Float8E5M2{bits});
    if (std::isnan(e4)) {
      EXPECT_TRUE(std::isnan(f4)) << std::hex << b;
      EXPECT_EQ(toFloat8E4M3(f4).bits & 0x7f, 0x7f) << std::hex << b;
    } else {
      EXPECT_EQ(f4, e4) << "e4m3fn 0x" << std::hex << b;
      EXPECT_EQ(std::signbit(f4), std::signbit(e4)) << "e4m3fn 0x" << std::hex << b;
      EXPECT_EQ(toFloat8E4M3(f4).bits, bits) << "e4m3fn 0x" << std::hex << b;
    }
    if (std::isnan(e5)) {
      EXPECT_TRUE(std::isnan(f5)) << std::hex << b;
      EXPECT_TRUE(std::isnan(ref::float8Value(toFloat8E5M2(f5).bits, ref::kE5M2)));
    } else {
      EXPECT_EQ(f5, e5) << "e5m2 0x" << std::hex << b;
      EXPECT_EQ(std::signbit(f5), std::signbit(e5)) << "e5m2 0x" << std::hex << b;
      EXPECT_EQ(toFloat8E5M2(f5).bits, bits) << "e5m2 0x" << std::hex << b;
    }
  }
}

// Floats around every boundary (ties between neighbours, the subnormal range, the largest
// finite values, overflow) and a reproducible spread: to nearest, ties to even; e4m3fn
// saturates, e5m2 overflows to infinity; a NaN keeps its sign.
TEST(Float8Bits, NarrowingRoundsToNearestEvenAndTreatsOverflowAsTorch) {
  std::vector<float> probes = {0.0f, -0.0f, INFINITY, -INFINITY, 464.0f, 465.0f, 479.0f, 480.0f,
                               1e6f, -1e6f, 61439.0f, 61440.0f, 65536.0f, 57344.0f, 3.4e38f,
                               std::numeric_limits<float>::denorm_min()};
  for (int e = -20; e <= 17; ++e) {
    for (int k = 0; k < 64; ++k) {  // every sixteenth of the steps of both formats
      for (float sign : {1.0f, -1.0f}) probes.push_back(sign * std::ldexp(1.0f + k / 64.0f, e));
    }
  }
  uint32_t state = 12345u;
  for (int i = 0; i < 100000; ++i) {
    state = state * 1664525u + 1013904223u;
    uint32_t bits = (state & 0x807fffffu) | ((100u + (state >> 8) % 50u) << 23);
    probes.push_back(bitsToFloat(bits));
  }
  for (float f : probes) {
    ASSERT_EQ(toFloat8E4M3(f).bits, ref::float8Bits(f, ref::kE4M3))
        << "e4m3fn of " << f << " (float bits 0x" << std::hex << floatToBits(f) << ")";
    ASSERT_EQ(toFloat8E5M2(f).bits, ref::float8Bits(f, ref::kE5M2))
        << "e5m2 of " << f << " (float bits 0x" << std::hex << floatToBits(f) << ")";
  }
  EXPECT_EQ(toFloat8E4M3(-NAN).bits, 0xff);
  EXPECT_EQ(toFloat8E5M2(NAN).bits, 0x7f);
}

// ---- the combines -----------------------------------------------------------------------------

// Every pair of patterns, as two ranks' elements: the combine in float, rounded once as the
// reference narrows (so a two-rank SUM is what torch gives for (a.float() + b.float()).to()).
float float8Reference(RedOp op, float a, float b) {
  if (op == RedOp::Max || op == RedOp::Min) {
    if (std::isnan(a) || std::isnan(b)) return NAN;
    return op == RedOp::Max ? std::fmax(a, b) : std::fmin(a, b);
  }
  if (op == RedOp::Product) return a * b;
  return a + b;  // SUM, and AVG's and PREMUL_SUM's combine
}

void expectEveryFloat8Pair(DType t, const ref::Float8Spec& spec) {
  std::vector<uint8_t> a(65536), b(65536);
  for (int i = 0; i < 65536; ++i) a[i] = static_cast<uint8_t>(i >> 8), b[i] = static_cast<uint8_t>(i);
  int ops = 0;
  for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::Product, RedOp::Min, RedOp::Max,
                   RedOp::PreMulSum, RedOp::BAnd, RedOp::BOr, RedOp::BXor}) {
    if (!opSupported(t, op)) continue;
    ++ops;
    for (HostIsa isa : buildsHere()) {
      std::vector<uint8_t> got(65536);
      combineFnOf(isa, t, op)(got.data(), a.data(), b.data(), 65536);
      for (int i = 0; i < 65536; ++i) {
        const float x = static_cast<float>(ref::float8Value(a[i], spec));
        const float y = static_cast<float>(ref::float8Value(b[i], spec));
        const float want = float8Reference(op, x, y);
        if ((op == RedOp::Max || op == RedOp::Min) && x == 0 && y == 0) {
          // +0 and -0 are equal: which one MAX keeps is not defined (nor in torch.maximum).
          ASSERT_EQ(ref::float8Value(got[i], spec), 0.0) << std::hex << int{a[i]} << int{b[i]};
          continue;
        }
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(ref::float8Value(got[i], spec)))
              << dtypeName(t) << " " << redOpName(op) << " " << buildName(isa) << " of 0x"
              << std::hex << int{a[i]} << ", 0x" << int{b[i]} << ": 0x" << int{got[i]};
          continue;
        }
        ASSERT_EQ(got[i], ref::float8Bits(want, spec))
            << dtypeName(t) << " " << redOpName(op) << " " << buildName(isa) << " of 0x"
            << std::hex << int{a[i]} << ", 0x" << int{b[i]};
      }
    }
  }
  EXPECT_EQ(ops, 6) << "the floating ops, not the bitwise ones";
}

TEST(ReduceOps, Float8CombinesEveryPairInFloatAndRoundsOnce) {
  expectEveryFloat8Pair(DType::Float8E4M3, ref::kE4M3);
  expectEveryFloat8Pair(DType::Float8E5M2, ref::kE5M2);
}

// AVG's division and PREMUL_SUM's scaling of every pattern: in float (the scaling's product
// in double, as for the other floats), rounded once to the format.
TEST(ReduceOps, Float8DividesAndScalesEveryPattern) {
  for (auto [t, spec] : {std::pair{DType::Float8E4M3, ref::kE4M3},
                         std::pair{DType::Float8E5M2, ref::kE5M2}}) {
    for (HostIsa isa : buildsHere()) {
      std::vector<uint8_t> v(256), scaled(256);
      for (int i = 0; i < 256; ++i) v[i] = static_cast<uint8_t>(i);
      divideFnOf(isa, t)(v.data(), 3, 256);
      std::vector<uint8_t> in(256);
      for (int i = 0; i < 256; ++i) in[i] = static_cast<uint8_t>(i);
      scaleFnOf(isa, t)(scaled.data(), in.data(), -0.375, 256);
      for (int i = 0; i < 256; ++i) {
        const double x = ref::float8Value(static_cast<uint8_t>(i), spec);
        if (std::isnan(x)) continue;
        EXPECT_EQ(v[i], ref::float8Bits(static_cast<float>(x) / 3.0f, spec))
            << dtypeName(t) << " " << buildName(isa) << " 0x" << std::hex << i << " / 3";
        EXPECT_EQ(scaled[i], ref::float8Bits(static_cast<float>(x * -0.375), spec))
            << dtypeName(t) << " " << buildName(isa) << " 0x" << std::hex << i << " * -0.375";
      }
    }
  }
}

// uint16/32/64: modulo 2^bits for SUM and PRODUCT, unsigned order for MIN/MAX, the bitwise
// ops, and AVG's division truncating; computed here in uint64 and masked.
template <typename T>
void expectUnsignedOps(DType t) {
  const uint64_t top = std::numeric_limits<T>::max();
  const std::vector<std::pair<uint64_t, uint64_t>> pairs = {
      {top, 1}, {top, top}, {top / 2 + 1, 2}, {0, top}, {12345, 678}, {top - 3, top / 3},
      {1, 0}, {top / 2, top / 2 + 2}};
  std::vector<T> a, b;
  for (auto [x, y] : pairs) a.push_back(static_cast<T>(x)), b.push_back(static_cast<T>(y));
  for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::Product, RedOp::Min, RedOp::Max, RedOp::BAnd,
                   RedOp::BOr, RedOp::BXor}) {
    ASSERT_TRUE(opSupported(t, op)) << dtypeName(t) << " " << redOpName(op);
    for (HostIsa isa : buildsHere()) {
      std::vector<T> got(a.size());
      combineFnOf(isa, t, op)(got.data(), a.data(), b.data(), static_cast<int64_t>(a.size()));
      for (size_t i = 0; i < a.size(); ++i) {
        const uint64_t x = a[i], y = b[i];
        uint64_t want = 0;
        switch (op) {
          case RedOp::Product: want = x * y; break;
          case RedOp::Min: want = x < y ? x : y; break;
          case RedOp::Max: want = x > y ? x : y; break;
          case RedOp::BAnd: want = x & y; break;
          case RedOp::BOr: want = x | y; break;
          case RedOp::BXor: want = x ^ y; break;
          default: want = x + y; break;
        }
        EXPECT_EQ(uint64_t{got[i]}, want & top)
            << dtypeName(t) << " " << redOpName(op) << " " << buildName(isa) << " of " << x
            << ", " << y;
      }
    }
  }
  EXPECT_FALSE(opSupported(t, RedOp::PreMulSum)) << "a negative factor has no unsigned product";
  for (HostIsa isa : buildsHere()) {
    std::vector<T> v = a;
    divideFnOf(isa, t)(v.data(), 3, static_cast<int64_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(uint64_t{v[i]}, uint64_t{a[i]} / 3);
  }
}

TEST(ReduceOps, WideUnsignedIntegersWrapAroundModuloTheirWidth) {
  expectUnsignedOps<uint16_t>(DType::UInt16);
  expectUnsignedOps<uint32_t>(DType::UInt32);
  expectUnsignedOps<uint64_t>(DType::UInt64);
  EXPECT_TRUE(opSupported(DType::UInt8, RedOp::PreMulSum)) << "uint8 keeps its rule";
  EXPECT_FALSE(opSupported(DType::Float8E4M3, RedOp::BXor));
  EXPECT_EQ(elementSize(DType::UInt64), 8u);
  EXPECT_EQ(elementSize(DType::Float8E5M2), 1u);
  EXPECT_STREQ(dtypeName(DType::Float8E4M3), "float8_e4m3fn");
  EXPECT_STREQ(dtypeName(DType::UInt32), "uint32");
}

}  // namespace
}  // namespace ring
