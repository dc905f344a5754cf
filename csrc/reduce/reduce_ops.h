// Element-wise reduction functors for every (dtype, op) pair this project supports, written
// once for host and device. The CPU executor calls them through a type-erased table
// (reduce_table.h); the CUDA kernels instantiate them directly.
//
// 16- and 8-bit floats are widened to float, combined, and rounded once: the same result as the
// native half / bfloat16 arithmetic of a GPU (float8: float8_bits.h says how it rounds).
// Unsigned integers wrap around modulo 2^bits, as C's unsigned arithmetic does. Bool is stored as one byte holding 0 or 1; SUM
// and MAX on bool mean OR, PRODUCT and MIN mean AND (as NCCL maps them).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/hostdevice.h"
#include "common/types.h"
#include "reduce/float8_bits.h"
#include "reduce/half_bits.h"

namespace ring {

// Storage type of each DType.
template <DType D> struct StorageOf;
template <> struct StorageOf<DType::Float32> { using type = float; };
template <> struct StorageOf<DType::Float64> { using type = double; };
template <> struct StorageOf<DType::Float16> { using type = Half; };
template <> struct StorageOf<DType::BFloat16> { using type = BFloat16; };
template <> struct StorageOf<DType::Int8> { using type = int8_t; };
template <> struct StorageOf<DType::Int16> { using type = int16_t; };
template <> struct StorageOf<DType::Int32> { using type = int32_t; };
template <> struct StorageOf<DType::Int64> { using type = int64_t; };
template <> struct StorageOf<DType::UInt8> { using type = uint8_t; };
template <> struct StorageOf<DType::Bool> { using type = uint8_t; };
template <> struct StorageOf<DType::UInt16> { using type = uint16_t; };
template <> struct StorageOf<DType::UInt32> { using type = uint32_t; };
template <> struct StorageOf<DType::UInt64> { using type = uint64_t; };
template <> struct StorageOf<DType::Float8E4M3> { using type = Float8E4M3; };
template <> struct StorageOf<DType::Float8E5M2> { using type = Float8E5M2; };

// The type arithmetic is done in, and conversions to and from storage.
template <typename T> struct Arith { using type = T; };
template <> struct Arith<Half> { using type = float; };
template <> struct Arith<BFloat16> { using type = float; };
template <> struct Arith<Float8E4M3> { using type = float; };
template <> struct Arith<Float8E5M2> { using type = float; };

template <typename T> RING_HOST_DEVICE typename Arith<T>::type widen(T v) { return v; }
RING_HOST_DEVICE float widen(Half v) { return toFloat(v); }
RING_HOST_DEVICE float widen(BFloat16 v) { return toFloat(v); }
RING_HOST_DEVICE float widen(Float8E4M3 v) { return toFloat(v); }
RING_HOST_DEVICE float widen(Float8E5M2 v) { return toFloat(v); }

template <typename T> RING_HOST_DEVICE T narrow(typename Arith<T>::type v) { return static_cast<T>(v); }
template <> RING_HOST_DEVICE Half narrow<Half>(float v) { return toHalf(v); }
template <> RING_HOST_DEVICE BFloat16 narrow<BFloat16>(float v) { return toBFloat16(v); }
template <> RING_HOST_DEVICE Float8E4M3 narrow<Float8E4M3>(float v) { return toFloat8E4M3(v); }
template <> RING_HOST_DEVICE Float8E5M2 narrow<Float8E5M2>(float v) { return toFloat8E5M2(v); }

// Binary combine for one (dtype, op). AVG and PREMUL_SUM combine as SUM; their scaling is a
// separate pre/post step (scaleElements / divideElements).
template <DType D, RedOp Op> struct Combine {
  using T = typename StorageOf<D>::type;
  using A = typename Arith<T>::type;
  RING_HOST_DEVICE static T apply(T x, T y) {
    A a = widen(x), b = widen(y);
    if (D == DType::Bool) {
      bool p = a != 0, q = b != 0;
      bool r;
      switch (Op) {
        case RedOp::Sum: case RedOp::Max: case RedOp::BOr: r = p || q; break;
        case RedOp::Product: case RedOp::Min: case RedOp::BAnd: r = p && q; break;
        case RedOp::BXor: r = p != q; break;
        default: r = p || q; break;
      }
      return narrow<T>(static_cast<A>(r ? 1 : 0));
    }
    switch (Op) {
      case RedOp::Sum: case RedOp::Avg: case RedOp::PreMulSum: return narrow<T>(wrapAdd(a, b));
      case RedOp::Product: return narrow<T>(wrapMul(a, b));
      // NaN wins for floating MIN/MAX, as torch.maximum / minimum propagate it.
      case RedOp::Max: return narrow<T>(a != a ? a : (b != b ? b : (a > b ? a : b)));
      case RedOp::Min: return narrow<T>(a != a ? a : (b != b ? b : (a < b ? a : b)));
      // Bitwise ops: only integer types reach here (floating pairs are refused by opSupported).
      case RedOp::BAnd: return narrow<T>(static_cast<A>(asInt(a) & asInt(b)));
      case RedOp::BOr: return narrow<T>(static_cast<A>(asInt(a) | asInt(b)));
      default: return narrow<T>(static_cast<A>(asInt(a) ^ asInt(b)));
    }
  }
  template <typename U> RING_HOST_DEVICE static int64_t asInt(U v) { return static_cast<int64_t>(v); }
  // Integers wrap around on overflow, as torch's do; computing in the unsigned type of the
  // same width makes that defined behaviour in C++ (signed overflow is not).
  RING_HOST_DEVICE static A wrapAdd(A a, A b) {
    if (std::is_integral<A>::value) {
      using UA = typename std::make_unsigned<typename std::conditional<std::is_integral<A>::value, A, int>::type>::type;
      return static_cast<A>(static_cast<UA>(static_cast<UA>(a) + static_cast<UA>(b)));
    }
    return static_cast<A>(a + b);
  }
  RING_HOST_DEVICE static A wrapMul(A a, A b) {
    if (std::is_integral<A>::value) {
      using UA = typename std::make_unsigned<typename std::conditional<std::is_integral<A>::value, A, int>::type>::type;
      // Promote to at least unsigned int so that uint16 * uint16 does not become signed int.
      using Wide = typename std::conditional<(sizeof(UA) < sizeof(unsigned)), unsigned, UA>::type;
      return static_cast<A>(static_cast<UA>(static_cast<Wide>(static_cast<UA>(a)) * static_cast<Wide>(static_cast<UA>(b))));
    }
    return static_cast<A>(a * b);
  }
};

// dst[i] = a[i] (op) b[i]. dst may alias a or b.
template <DType D, RedOp Op>
RING_HOST_DEVICE void combineRange(void* dst, const void* a, const void* b, int64_t begin,
                                   int64_t end) {
  using T = typename StorageOf<D>::type;
  T* out = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (int64_t i = begin; i < end; ++i) out[i] = Combine<D, Op>::apply(x[i], y[i]);
}

// v[i] = v[i] / divisor, for AVG's final step. Integers divide with truncation toward zero.
template <DType D>
RING_HOST_DEVICE void divideRange(void* data, int64_t divisor, int64_t begin, int64_t end) {
  using T = typename StorageOf<D>::type;
  using A = typename Arith<T>::type;
  T* v = static_cast<T*>(data);
  for (int64_t i = begin; i < end; ++i) {
    v[i] = narrow<T>(static_cast<A>(widen(v[i]) / static_cast<A>(divisor)));
  }
}

// a * b rounded to double before anything else touches it. Why: nvcc fuses `c + a * b` into
// one multiply-add by default (--fmad=true), rounding once where the CPU path rounds twice, so
// a float64 PREMUL_SUM would give the GPU other bits than the CPU ranks. __dmul_rn is never
// contracted; on the host an empty asm that takes and gives back the product forces the
// rounded value into a register first, so no contraction spans it either (host builds with
// FMA contraction: CMakeLists.txt). float32 and the 16-bit types need none of this: their
// double product is narrowed before the add, and no contraction crosses a conversion.
RING_HOST_DEVICE double mulRounded(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  double p = a * b;
#if defined(__GNUC__) && defined(__x86_64__)
  __asm__("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#else
  volatile double v = p;
  p = v;
#endif
  return p;
#endif
}

// out[i] = in[i] * factor, for PREMUL_SUM's pre-multiplication. Computed in double (rounded
// before any later add: mulRounded) and converted back (integers truncate toward zero).
template <DType D>
RING_HOST_DEVICE void scaleRange(void* out, const void* in, double factor, int64_t begin,
                                 int64_t end) {
  using T = typename StorageOf<D>::type;
  using A = typename Arith<T>::type;
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(in);
  for (int64_t i = begin; i < end; ++i) {
    o[i] = narrow<T>(static_cast<A>(mulRounded(static_cast<double>(widen(x[i])), factor)));
  }
}

// Calls fn.template operator()<D, Op>() for the runtime pair; the single list of
// instantiations shared by the CPU table and the CUDA launcher.
#define RING_FOR_EACH_DTYPE(X)                                                                \
  X(Float32) X(Float64) X(Float16) X(BFloat16) X(Int8) X(Int16) X(Int32) X(Int64) X(UInt8) X(Bool) \
  X(UInt16) X(UInt32) X(UInt64) X(Float8E4M3) X(Float8E5M2)
#define RING_FOR_EACH_OP(X) \
  X(Sum) X(Avg) X(Product) X(Min) X(Max) X(BAnd) X(BOr) X(BXor) X(PreMulSum)

}  // namespace ring
