// Reference float16 / bfloat16 encoders and decoders for the tests, written from the formats'
// definitions with exact double arithmetic (no bit tricks), so that they check half_bits.h
// rather than repeat it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ring {
namespace ref {

// Rounds finite |x| to a binary format with `mantissaBits` stored bits and minimum normal
// exponent `minExp`, ties to even, and returns the rounded magnitude (exact in double).
inline double roundToFormat(double x, int mantissaBits, int minExp) {
  double a = std::fabs(x);
  if (a == 0) return 0;
  int e = std::ilogb(a);
  if (e < minExp) e = minExp;  // subnormals share the smallest normal exponent's spacing
  double ulp = std::ldexp(1.0, e - mantissaBits);
  return std::nearbyint(a / ulp) * ulp;  // default rounding mode: to nearest, ties to even
}

// IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits.
inline uint16_t halfBits(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7e00;  // any NaN; callers compare NaN-ness only
  if (std::isinf(f)) return sign | 0x7c00;
  double v = roundToFormat(f, 10, -14);
  if (v == 0) return sign;
  int e = std::ilogb(v);
  if (e > 15) return sign | 0x7c00;  // rounded past the largest finite half (65504)
  if (e < -14) return sign | static_cast<uint16_t>(std::ldexp(v, 24));  // subnormal: v / 2^-24
  auto mantissa = static_cast<uint16_t>(std::ldexp(v, -e) * 1024.0 - 1024.0);
  return sign | static_cast<uint16_t>((e + 15) << 10) | mantissa;
}

inline double halfValue(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
  if (e == 0x1f) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024.0 + m, e - 25);
}

// bfloat16: float's exponent (8 bits, bias 127), 7 mantissa bits.
inline uint16_t bfloat16Bits(float f) {
  if (std::isnan(f)) return 0x7fc0;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isinf(f)) return sign | 0x7f80;
  double v = roundToFormat(f, 7, -126);
  if (v >= std::ldexp(1.0, 128)) return sign | 0x7f80;
  // v has at most 8 significant bits, so it is exact in float, whose top half is the answer.
  float exact = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &exact, sizeof u);
  return sign | static_cast<uint16_t>(u >> 16);
}

inline double bfloat16Value(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int e = (bits >> 7) & 0xff, m = bits & 0x7f;
  if (e == 0xff) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -133);
  return sign * std::ldexp(128.0 + m, e - 134);
}

}  // namespace ref
}  // namespace ring
