#include "common/types.h"

namespace ring {

size_t elementSize(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Int64:
      return 8;
    case DType::Float32:
    case DType::Int32:
      return 4;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int16:
      return 2;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
      return 1;
    default:
      return 0;
  }
}

const char* dtypeName(DType t) {
  static const char* names[] = {"float32", "float64", "float16", "bfloat16", "int8",
                                "int16",   "int32",   "int64",   "uint8",    "bool"};
  auto i = static_cast<size_t>(t);
  return i < static_cast<size_t>(DType::kCount) ? names[i] : "unknown-dtype";
}

const char* redOpName(RedOp op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  auto i = static_cast<size_t>(op);
  return i < static_cast<size_t>(RedOp::kCount) ? names[i] : "unknown-op";
}

const char* collectiveName(Collective c) {
  static const char* names[] = {"all_reduce", "broadcast", "reduce",  "all_gather",
                                "reduce_scatter", "all_to_all", "gather", "scatter",
                                "barrier", "send/recv"};
  auto i = static_cast<size_t>(c);
  return i < static_cast<size_t>(Collective::kCount) ? names[i] : "unknown-collective";
}

bool isFloating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 ||
         t == DType::BFloat16;
}

bool opSupported(DType t, RedOp op) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Product:
    case RedOp::Min:
    case RedOp::Max:
      return true;  // on bool: SUM = OR, PRODUCT = AND, MAX = OR, MIN = AND (as NCCL maps them)
    case RedOp::Avg:
    case RedOp::PreMulSum:
      return t != DType::Bool;  // an average of truth values has no bool representation
    case RedOp::BAnd:
    case RedOp::BOr:
    case RedOp::BXor:
      return !isFloating(t);
    default:
      return false;
  }
}

}  // namespace ring
