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

size_t elementSize(DType t);
const char* dtypeName(DType t);
const char* redOpName(RedOp op);
const char* collectiveName(Collective c);

bool isFloating(DType t);
bool isUnsigned(DType t);

// Whether `op` means something for `t` (e.g. BAND on float does not). Pairs that return false
// are refused before any communication.
bool opSupported(DType t, RedOp op);

}  // namespace ring
