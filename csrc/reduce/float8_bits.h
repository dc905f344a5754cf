// The two 8-bit float formats of torch (float8_e4m3fn, float8_e5m2) stored as raw bytes, with
// conversions to and from float that compile for host and device alike. Reductions widen to
// float, combine there, and narrow once per combine, as the 16-bit floats do (half_bits.h).
//
// Narrowing rounds to nearest, ties to even, and treats what lies past the largest finite
// value as torch (2.13 and later) casts a float: e4m3fn, which has no infinity, saturates to
// +-448 (infinities too); e5m2 rounds to +-infinity. A NaN stays a NaN (0x7f with its sign),
// so `(a.float() + b.float()).to(torch.float8_e4m3fn)` is the reference of a two-rank SUM.
// Integer arithmetic only: no float rounding mode or device intrinsic takes part.
#pragma once

#include <cstdint>

#include "common/hostdevice.h"
#include "reduce/half_bits.h"

namespace ring {

struct Float8E4M3 {
  uint8_t bits;
};
struct Float8E5M2 {
  uint8_t bits;
};

// The layout of a format: mantissa bits, exponent bias, the largest finite pattern, and what
// a finite value past it becomes.
template <int MantissaBits, int Bias, uint32_t LargestFinite, uint32_t Overflow>
struct Float8Format {
  static constexpr int kMantissa = MantissaBits;
  static constexpr int kBias = Bias;
  static constexpr uint32_t kLargestFinite = LargestFinite;
  static constexpr uint32_t kOverflow = Overflow;
};
using E4M3Format = Float8Format<3, 7, 0x7eu, 0x7eu>;  // saturates; 0x7f is NaN
using E5M2Format = Float8Format<2, 15, 0x7bu, 0x7cu>;  // 0x7c is infinity

// Rounds `value >> shift` to nearest, ties to even (shift 1..31).
RING_HOST_DEVICE uint32_t shiftRoundedToEven(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t dropped = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
}

template <typename Format>
RING_HOST_DEVICE uint8_t float8FromFloat(float f) {
  const uint32_t u = floatToBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  const uint32_t exponent = magnitude >> 23;  // float's biased exponent
  // float's biased exponent of the format's smallest normal value, 2^(1 - bias).
  constexpr uint32_t kSmallestNormal = 127u + 1u - Format::kBias;
  uint32_t code;
  if (exponent < kSmallestNormal) {
    // Subnormal (or zero) in the format: count units of its smallest step, 2^(1-bias-m).
    // The float's significand is an integer times 2^(e-150); the shift brings it to units.
    const uint32_t significand = exponent == 0 ? (magnitude & 0x7fffffu)
                                               : ((magnitude & 0x7fffffu) | 0x800000u);
    const int unitExponent = 1 - Format::kBias - Format::kMantissa;
    const int shift = 150 + unitExponent - static_cast<int>(exponent == 0 ? 1 : exponent);
    code = shift > 25 ? 0u : shiftRoundedToEven(significand, shift);
  } else {
    // Normal: the exponent rebiased in place, the mantissa rounded from 23 bits; a carry out
    // of the mantissa moves the exponent up, as it should.
    const uint32_t rebased = magnitude - ((127u - Format::kBias) << 23);
    code = shiftRoundedToEven(rebased, 23 - Format::kMantissa);
    if (exponent == 0xffu || code > Format::kLargestFinite) code = Format::kOverflow;
  }
  return static_cast<uint8_t>(sign | code);
}

template <typename Format>
RING_HOST_DEVICE float floatFromFloat8(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t exponent = (bits & 0x7fu) >> Format::kMantissa;
  const uint32_t mantissa = bits & ((1u << Format::kMantissa) - 1u);
  constexpr uint32_t kTopExponent = 0x7fu >> Format::kMantissa;
  if (Format::kOverflow == Format::kLargestFinite) {  // e4m3fn: only all ones is special
    if ((bits & 0x7fu) == 0x7fu) return bitsToFloat(sign | 0x7fc00000u);
  } else if (exponent == kTopExponent) {  // e5m2: infinity, or NaN with a payload
    return bitsToFloat(sign | 0x7f800000u | (mantissa == 0 ? 0u : 0x400000u | (mantissa << 21)));
  }
  if (exponent == 0) {
    // mantissa units of 2^(1-bias-m): exact in float (a small integer times a power of two).
    const float unit = bitsToFloat(static_cast<uint32_t>(127 + 1 - Format::kBias - Format::kMantissa) << 23);
    const float v = static_cast<float>(mantissa) * unit;
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exponent + 127u - Format::kBias) << 23) |
                     (mantissa << (23 - Format::kMantissa)));
}

RING_HOST_DEVICE float toFloat(Float8E4M3 v) { return floatFromFloat8<E4M3Format>(v.bits); }
RING_HOST_DEVICE float toFloat(Float8E5M2 v) { return floatFromFloat8<E5M2Format>(v.bits); }
RING_HOST_DEVICE Float8E4M3 toFloat8E4M3(float f) { return {float8FromFloat<E4M3Format>(f)}; }
RING_HOST_DEVICE Float8E5M2 toFloat8E5M2(float f) { return {float8FromFloat<E5M2Format>(f)}; }

}  // namespace ring
