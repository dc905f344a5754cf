// Element types, reduction operators and collective kinds, as this project names them.
// Torch-free: the backend layer maps at::ScalarType and c10d::ReduceOp onto these.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ring {

enum class DType : uint8_t {
  Float32 = 0,
  Float64,
  Float16,
  BFloat16,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  Bool,
  // Added after the first ten so that their numbers (in every message's fingerprint) stay.
  UInt16,
  UInt32,
  UInt64,
  Float8E4M3,  // torch.float8_e4m3fn: no infinity, one NaN pattern per sign
  Float8E5M2,  // torch.float8_e5m2: IEEE-like, with infinities
  kCount
};

enum class RedOp : uint8_t {
  Sum = 0,
  Avg,
  Product,
  Min,
  Max,
  BAnd,
  BOr,
  BXor,
  PreMulSum,
  kCount
};

enum class Collective : uint8_t {
  AllReduce = 0,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  Barrier,
  PointToPoint,
  kCount
};

// The sizes and names below are asked on every call (its checks, its flight recorder entry):
// lookups, so defined here, where the compiler can fold them into the caller.

inline size_t elementSize(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Int64:
    case DType::UInt64:
      return 8;
    case DType::Float32:
    case DType::Int32:
    case DType::UInt32:
      return 4;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int16:
    case DType::UInt16:
      return 2;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      return 1;
    default:
      return 0;
  }
}

inline const char* dtypeName(DType t) {
  static const char* names[] = {"float32", "float64", "float16",       "bfloat16",
                                "int8",    "int16",   "int32",         "int64",
                                "uint8",   "bool",    "uint16",        "uint32",
                                "uint64",  "float8_e4m3fn", "float8_e5m2"};
  static_assert(sizeof names / sizeof names[0] == static_cast<size_t>(DType::kCount),
                "a name for every DType");
  auto i = static_cast<size_t>(t);
  return i < static_cast<size_t>(DType::kCount) ? names[i] : "unknown-dtype";
}

inline const char* redOpName(RedOp op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  auto i = static_cast<size_t>(op);
  return i < static_cast<size_t>(RedOp::kCount) ? names[i] : "unknown-op";
}

inline const char* collectiveName(Collective c) {
  static const char* names[] = {"all_reduce", "broadcast", "reduce",  "all_gather",
                                "reduce_scatter", "all_to_all", "gather", "scatter",
                                "barrier", "send/recv"};
  auto i = static_cast<size_t>(c);
  return i < static_cast<size_t>(Collective::kCount) ? names[i] : "unknown-collective";
}

inline bool isFloating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 ||
         t == DType::BFloat16 || t == DType::Float8E4M3 || t == DType::Float8E5M2;
}

inline bool isUnsigned(DType t) {
  return t == DType::UInt8 || t == DType::UInt16 || t == DType::UInt32 || t == DType::UInt64;
}

// Whether `op` means something for `t` (e.g. BAND on float does not). Pairs that return false
// are refused before any communication.
inline bool opSupported(DType t, RedOp op) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Product:
    case RedOp::Min:
    case RedOp::Max:
      return true;  // on bool: SUM = OR, PRODUCT = AND, MAX = OR, MIN = AND (as NCCL maps them)
    case RedOp::Avg:
      return t != DType::Bool;  // an average of truth values has no bool representation
    case RedOp::PreMulSum:
      // A real factor times an unsigned value has no unsigned result when the factor is
      // negative, so the wider unsigned types refuse it (NCCL's factor has the tensor's own
      // type; torch passes a double). uint8 keeps the rule it has had since the first release.
      return t != DType::Bool && (t == DType::UInt8 || !isUnsigned(t));
    case RedOp::BAnd:
    case RedOp::BOr:
    case RedOp::BXor:
      return !isFloating(t);
    default:
      return false;
  }
}

}  // namespace ring
