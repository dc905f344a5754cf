#include "reduce/reduce_neon.h"

#include "reduce/reduce_ops.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#define RING_COMBINE_NEON 1
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#else
#define RING_COMBINE_NEON 0
#endif

namespace ring {

#if RING_COMBINE_NEON
namespace {

// Why a build of its own where the compiler already vectorizes the portable loops: the portable
// 16-bit conversions (half_bits.h) branch on the exponent, so no compiler vectorizes a float16 or
// bfloat16 loop, which then runs an element at a time (on x86 some twenty times slower than
// float32's before its AVX2 build: docs/notes/code_comment_figures.md). Here float16 widens and
// narrows through the CPU's own conversions (FCVTL/FCVTN, part of ARMv8.0's Advanced SIMD) and
// bfloat16 through toBFloat16's integer rounding, eight lanes at a time; float32 is written out
// with its four ops so that what each lane computes is in plain sight.
//
// Why the results are the baseline's bits, as the x86 builds (reduce_table.cc): each element
// is one IEEE operation on its own two operands whatever the vector width; nothing is
// reassociated; this file is compiled with -ffp-contract=off (CMakeLists.txt), and an aarch64
// compiler would otherwise fuse a multiply and an add, since every ARMv8 CPU has FMA. The
// conversions round to nearest even under the FPCR's default mode (Linux starts every thread
// with FPCR = 0: round to nearest, no flush to zero, NaNs propagated), as toHalf does; only a
// NaN's payload may differ, and a NaN stays a NaN (tests/cpp/test_reduce_sixteen_bit_builds.cc
// compares all 65,536 patterns of each 16-bit type against the baseline).

// Eight float16 lanes to two float32 vectors (exact) and back (to nearest even).
inline float32x4x2_t widenHalfx8(const uint16_t* p) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
  return {{vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)}};
}
inline void narrowHalfx8(float32x4x2_t f, uint16_t* p) {
  const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(f.val[0]), f.val[1]);
  vst1q_u16(p, vreinterpretq_u16_f16(h));
}

// Eight bfloat16 lanes: widening is a shift into the top half of each float.
inline float32x4x2_t widenBf16x8(const uint16_t* p) {
  const uint16x8_t h = vld1q_u16(p);
  return {{vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
           vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))}};
}
// toBFloat16 on four lanes: a NaN keeps its top half with the quiet bit set; anything else is
// rounded to nearest, ties to even, on the sixteen bits dropped. (BFCVTN, ARMv8.6's own
// narrowing, is not in every aarch64 CPU this build runs on.)
inline uint16x4_t narrowBf16x4(float32x4_t f) {
  const uint32x4_t u = vreinterpretq_u32_f32(f);
  const uint32x4_t magnitude = vandq_u32(u, vdupq_n_u32(0x7fffffff));
  const uint32x4_t isNaN = vcgtq_u32(magnitude, vdupq_n_u32(0x7f800000));
  const uint32x4_t top = vshrq_n_u32(u, 16);
  const uint32x4_t nanBits = vorrq_u32(top, vdupq_n_u32(0x40));
  const uint32x4_t bias = vaddq_u32(vdupq_n_u32(0x7fff), vandq_u32(top, vdupq_n_u32(1)));
  const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(u, bias), 16);
  return vmovn_u32(vbslq_u32(isNaN, nanBits, rounded));  // every lane below 0x10000
}
inline void narrowBf16x8(float32x4x2_t f, uint16_t* p) {
  vst1q_u16(p, vcombine_u16(narrowBf16x4(f.val[0]), narrowBf16x4(f.val[1])));
}

// Either 16-bit type's widening and narrowing, by kHalf (float16) or not (bfloat16).
template <bool kHalf>
inline float32x4x2_t widenx8(const uint16_t* p) {
  return kHalf ? widenHalfx8(p) : widenBf16x8(p);
}
template <bool kHalf>
inline void narrowx8(float32x4x2_t f, uint16_t* p) {
  if (kHalf) {
    narrowHalfx8(f, p);
  } else {
    narrowBf16x8(f, p);
  }
}

// Combine<Float32, Op> on four lanes. MAX and MIN as the functor, not FMAX/FMIN: those give +0
// for the pair (+0, -0) in either order, where the functor keeps the second operand when
// neither is larger; a NaN operand wins, the first one if both are NaN.
template <RedOp Op>
inline float32x4_t combineFloatx4(float32x4_t a, float32x4_t b) {
  if constexpr (Op == RedOp::Product) {
    return vmulq_f32(a, b);
  } else if constexpr (Op == RedOp::Max || Op == RedOp::Min) {
    const uint32x4_t aWins = Op == RedOp::Max ? vcgtq_f32(a, b) : vcltq_f32(a, b);
    const uint32x4_t aIsNaN = vmvnq_u32(vceqq_f32(a, a));
    const uint32x4_t bIsNaN = vmvnq_u32(vceqq_f32(b, b));
    // a where a wins or is NaN, unless only b is NaN.
    const uint32x4_t takeA = vorrq_u32(aIsNaN, vbicq_u32(aWins, bIsNaN));
    return vbslq_f32(takeA, a, b);
  } else {
    return vaddq_f32(a, b);  // SUM, and AVG and PREMUL_SUM, which combine as SUM
  }
}

constexpr bool kOwnFloatOp(RedOp op) {
  return op == RedOp::Sum || op == RedOp::Avg || op == RedOp::PreMulSum ||
         op == RedOp::Product || op == RedOp::Max || op == RedOp::Min;
}

// float32: sixteen elements an iteration (four vectors, both operands read before the write:
// dst may be a or b), the last 0-15 as the baseline does them.
template <RedOp Op>
void combineFloatNeon(void* dst, const void* a, const void* b, int64_t count) {
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  auto* out = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const float32x4x4_t p = vld1q_f32_x4(x + i);
    const float32x4x4_t q = vld1q_f32_x4(y + i);
    float32x4x4_t r;
    for (int k = 0; k < 4; ++k) r.val[k] = combineFloatx4<Op>(p.val[k], q.val[k]);
    vst1q_f32_x4(out + i, r);
  }
  combineRange<DType::Float32, Op>(dst, a, b, i, count);
}

// float16 and bfloat16: eight elements widened to float, combined as Combine<D> does in float,
// narrowed back; the last 0-7 as the baseline does them.
template <DType D, RedOp Op>
void combineSixteenBitNeon(void* dst, const void* a, const void* b, int64_t count) {
  constexpr bool kHalf = D == DType::Float16;
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    float32x4x2_t p = widenx8<kHalf>(x + i);
    const float32x4x2_t q = widenx8<kHalf>(y + i);
    p.val[0] = combineFloatx4<Op>(p.val[0], q.val[0]);
    p.val[1] = combineFloatx4<Op>(p.val[1], q.val[1]);
    narrowx8<kHalf>(p, out + i);
  }
  combineRange<D, Op>(dst, a, b, i, count);
}

// AVG's division: widened, divided in float by the divisor as a float (divideRange's
// arithmetic for the 16-bit types), narrowed.
template <DType D>
void divideSixteenBitNeon(void* data, int64_t divisor, int64_t count) {
  constexpr bool kHalf = D == DType::Float16;
  auto* v = static_cast<uint16_t*>(data);
  const float32x4_t by = vdupq_n_f32(static_cast<float>(divisor));
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    float32x4x2_t f = widenx8<kHalf>(v + i);
    f.val[0] = vdivq_f32(f.val[0], by);
    f.val[1] = vdivq_f32(f.val[1], by);
    narrowx8<kHalf>(f, v + i);
  }
  divideRange<D>(data, divisor, i, count);
}

// PREMUL_SUM's scaling: scaleRange's three roundings per element in its order (the product in
// double, to float, to the 16-bit type), all to nearest even.
inline float32x4_t scaleFloatx4(float32x4_t f, float64x2_t by) {
  const float64x2_t lo = vmulq_f64(vcvt_f64_f32(vget_low_f32(f)), by);
  const float64x2_t hi = vmulq_f64(vcvt_high_f64_f32(f), by);
  return vcvt_high_f32_f64(vcvt_f32_f64(lo), hi);
}
template <DType D>
void scaleSixteenBitNeon(void* out, const void* in, double factor, int64_t count) {
  constexpr bool kHalf = D == DType::Float16;
  const auto* x = static_cast<const uint16_t*>(in);
  auto* o = static_cast<uint16_t*>(out);
  const float64x2_t by = vdupq_n_f64(factor);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    float32x4x2_t f = widenx8<kHalf>(x + i);  // read before the write
    f.val[0] = scaleFloatx4(f.val[0], by);
    f.val[1] = scaleFloatx4(f.val[1], by);
    narrowx8<kHalf>(f, o + i);
  }
  scaleRange<D>(out, in, factor, i, count);
}

constexpr int kOps = static_cast<int>(RedOp::kCount);

struct NeonTable {
  CombineFn float32[kOps] = {};
  CombineFn half[kOps] = {};
  CombineFn bf16[kOps] = {};
  NeonTable() {
#define RING_ADD_OP(OP)                                                                     \
  if constexpr (kOwnFloatOp(RedOp::OP)) {                                                   \
    float32[static_cast<int>(RedOp::OP)] = &combineFloatNeon<RedOp::OP>;                    \
    half[static_cast<int>(RedOp::OP)] = &combineSixteenBitNeon<DType::Float16, RedOp::OP>;  \
    bf16[static_cast<int>(RedOp::OP)] = &combineSixteenBitNeon<DType::BFloat16, RedOp::OP>; \
  }
    RING_FOR_EACH_OP(RING_ADD_OP)
#undef RING_ADD_OP
  }
};

}  // namespace

bool cpuHasNeon() {
  const unsigned long caps = getauxval(AT_HWCAP);
  return (caps & HWCAP_ASIMD) != 0 && (caps & HWCAP_FP) != 0;
}

CombineFn neonCombine(DType t, RedOp op) {
  static const NeonTable table;
  switch (t) {
    case DType::Float32: return table.float32[static_cast<int>(op)];
    case DType::Float16: return table.half[static_cast<int>(op)];
    case DType::BFloat16: return table.bf16[static_cast<int>(op)];
    default: return nullptr;
  }
}
DivideFn neonDivide(DType t) {
  if (t == DType::Float16) return &divideSixteenBitNeon<DType::Float16>;
  if (t == DType::BFloat16) return &divideSixteenBitNeon<DType::BFloat16>;
  return nullptr;
}
ScaleFn neonScale(DType t) {
  if (t == DType::Float16) return &scaleSixteenBitNeon<DType::Float16>;
  if (t == DType::BFloat16) return &scaleSixteenBitNeon<DType::BFloat16>;
  return nullptr;
}

#else  // no NEON build in this binary

bool cpuHasNeon() { return false; }
CombineFn neonCombine(DType, RedOp) { return nullptr; }
DivideFn neonDivide(DType) { return nullptr; }
ScaleFn neonScale(DType) { return nullptr; }

#endif

}  // namespace ring
