#include "backend/tensor_checks.h"

#include <c10/util/Exception.h>

#include "common/errors.h"

namespace ring {

void failUsage(const CheckScope& s, const std::string& text) {
  TORCH_CHECK(false, "ring: ", s.collective, " on rank ", s.rank, ": ", text);
  throw;  // unreachable
}

std::string shapeString(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += strCat(i ? ", " : "", t.size(i));
  return s + "]";
}

int64_t bytesHeld(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (t.is_sparse()) {
      n += t._values().numel() * static_cast<int64_t>(t.element_size()) +
           t._indices().numel() * static_cast<int64_t>(sizeof(int64_t));
    } else {
      n += t.numel() * static_cast<int64_t>(t.element_size());
    }
  }
  return n;
}

DType toRingDType(const CheckScope& s, at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kDouble: return DType::Float64;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    case at::kChar: return DType::Int8;
    case at::kShort: return DType::Int16;
    case at::kInt: return DType::Int32;
    case at::kLong: return DType::Int64;
    case at::kByte: return DType::UInt8;
    case at::kBool: return DType::Bool;
    case at::kUInt16: return DType::UInt16;
    case at::kUInt32: return DType::UInt32;
    case at::kUInt64: return DType::UInt64;
    case at::kFloat8_e4m3fn: return DType::Float8E4M3;
    case at::kFloat8_e5m2: return DType::Float8E5M2;
    default:
      failUsage(s, strCat("dtype ", c10::toString(t), " is not supported; supported: float32, "
                          "float64, float16, bfloat16, float8_e4m3fn, float8_e5m2, int8, int16, "
                          "int32, int64, uint8, uint16, uint32, uint64, bool"));
  }
}

RedOp toRingOp(const CheckScope& s, const c10d::ReduceOp& op, at::ScalarType t, double* factor,
               at::Tensor* deviceFactor) {
  RedOp r;
  *factor = 1.0;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: r = RedOp::Sum; break;
    case c10d::ReduceOp::AVG: r = RedOp::Avg; break;
    case c10d::ReduceOp::PRODUCT: r = RedOp::Product; break;
    case c10d::ReduceOp::MIN: r = RedOp::Min; break;
    case c10d::ReduceOp::MAX: r = RedOp::Max; break;
    case c10d::ReduceOp::BAND: r = RedOp::BAnd; break;
    case c10d::ReduceOp::BOR: r = RedOp::BOr; break;
    case c10d::ReduceOp::BXOR: r = RedOp::BXor; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      r = RedOp::PreMulSum;
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (sup == nullptr) failUsage(s, "PREMUL_SUM without a factor");
      if (sup->tensor_factor.defined()) {
        if (sup->tensor_factor.numel() != 1) {
          failUsage(s, strCat("PREMUL_SUM's factor tensor must hold one element, it has ",
                              sup->tensor_factor.numel()));
        }
        if (deviceFactor != nullptr && sup->tensor_factor.is_cuda()) {
          *deviceFactor = sup->tensor_factor;
        } else {
          *factor = sup->tensor_factor.item<double>();
        }
      } else {
        *factor = sup->double_factor;
      }
      break;
    }
    default:
      failUsage(s, strCat("reduce op ", static_cast<int>(op.op_), " is not supported"));
  }
  DType d = toRingDType(s, t);
  if (!opSupported(d, r)) {
    const char* why = isFloating(d) ? " (bitwise ops need an integer or bool tensor)"
                      : isUnsigned(d) ? " (PREMUL_SUM's real factor may be negative, which no "
                                        "unsigned value holds; scale the tensor first and use SUM)"
                                      : " (AVG and PREMUL_SUM scale values, and a bool cannot "
                                        "hold the result)";
    failUsage(s, strCat("reduce op ", redOpName(r), " is not defined for dtype ", dtypeName(d), why));
  }
  return r;
}

double hostFactor(double factor, const at::Tensor& deviceFactor) {
  return deviceFactor.defined() ? deviceFactor.item<double>() : factor;
}

void checkTensor(const CheckScope& s, const at::Tensor& t, std::string_view what) {
  if (!t.defined()) failUsage(s, strCat(what, " is an undefined tensor"));
  if (t.layout() != at::kStrided) {
    failUsage(s, strCat(what, " is a ", t.layout(),
                        " tensor; only dense tensors are supported (use .to_dense())"));
  }
  if (!t.device().is_cpu() && !t.device().is_cuda()) {
    failUsage(s, strCat(what, " is on device ", t.device().str(), "; the ring backend serves "
                        "cpu and cuda tensors"));
  }
  if (!t.is_contiguous()) {
    failUsage(s, strCat(what, " is not contiguous (shape ", shapeString(t),
                        "); collectives work in place, so pass a contiguous tensor and copy the "
                        "result back"));
  }
  toRingDType(s, t.scalar_type());
}

void checkSingle(const CheckScope& s, const std::vector<at::Tensor>& v, std::string_view what) {
  if (v.size() != 1) {
    failUsage(s, strCat("expected exactly one ", what, " tensor (one device per rank), got ",
                        v.size()));
  }
  checkTensor(s, v[0], what);
}

void checkSameDevice(const CheckScope& s, const at::Tensor& a, const at::Tensor& b) {
  if (a.device() != b.device()) {
    failUsage(s, strCat("tensors are on different devices (", a.device().str(), " and ",
                        b.device().str(), "); all tensors of one call must share a device"));
  }
}

void checkSameDType(const CheckScope& s, const at::Tensor& a, const at::Tensor& b,
                    const std::string& what) {
  if (a.scalar_type() != b.scalar_type()) {
    failUsage(s, strCat(what, " has dtype ", c10::toString(b.scalar_type()), " but the input has ",
                        c10::toString(a.scalar_type()), "; they must match"));
  }
}

void checkRoot(const CheckScope& s, int64_t root, const char* argument) {
  if (root < 0 || root >= s.size) {
    failUsage(s, strCat("invalid ", argument, " ", root, ": expected a rank in [0, ", s.size - 1,
                        "] of this group"));
  }
}

void checkNumel(const CheckScope& s, const at::Tensor& t, int64_t expected, const std::string& what,
                const std::string& why) {
  if (t.numel() != expected) {
    failUsage(s, strCat(what, " has ", t.numel(), " elements (shape ", shapeString(t),
                        ") but ", expected, " are expected (", why, ")"));
  }
}

void checkListSize(const CheckScope& s, size_t got, size_t expected, const std::string& what) {
  if (got != expected) {
    failUsage(s, strCat(what, " has ", got, " tensors but the group has ", expected,
                        " ranks; pass one tensor per rank"));
  }
}

void checkPerRankList(const CheckScope& s, const std::vector<std::vector<at::Tensor>>& lists,
                      const at::Tensor& like, const char* item, const char* sameSize) {
  if (lists.size() != 1) failUsage(s, strCat("expected one ", item, " list, got ", lists.size()));
  checkListSize(s, lists[0].size(), static_cast<size_t>(s.size), strCat("the ", item, " list"));
  for (size_t i = 0; i < lists[0].size(); ++i) {
    const at::Tensor& t = lists[0][i];
    const std::string what = strCat(item, "[", i, "]");
    checkTensor(s, t, what);
    checkSameDType(s, like, t, what);
    checkSameDevice(s, like, t);
    checkNumel(s, t, like.numel(), what, sameSize);
  }
}

void checkBlockPair(const CheckScope& s, const at::Tensor& part, const std::string& partName,
                    const at::Tensor& whole, const std::string& wholeName) {
  checkTensor(s, part, partName);
  checkTensor(s, whole, wholeName);
  checkSameDevice(s, part, whole);
  checkSameDType(s, part, whole, wholeName);
  checkNumel(s, whole, part.numel() * s.size, wholeName,
             strCat("world size ", s.size, " x ", partName, "'s ", part.numel()));
}

std::vector<DType> checkBlockPairs(const CheckScope& s, const std::vector<at::Tensor>& parts,
                                   const char* partName, const std::vector<at::Tensor>& wholes,
                                   const char* wholeName) {
  if (wholes.size() != parts.size()) {
    failUsage(s, strCat(wholes.size(), " ", wholeName, "s for ", parts.size(), " ", partName, "s"));
  }
  std::vector<DType> dtypes;
  for (size_t i = 0; i < parts.size(); ++i) {
    checkBlockPair(s, parts[i], strCat(partName, "[", i, "]"), wholes[i],
                   strCat(wholeName, "[", i, "]"));
    checkSameDevice(s, parts[0], parts[i]);
    dtypes.push_back(toRingDType(s, parts[i].scalar_type()));
  }
  return dtypes;
}

int checkRootedTensor(const CheckScope& s, const std::vector<at::Tensor>& tensors, int64_t root,
                      int64_t rootTensor, const char* rootName) {
  checkSingle(s, tensors, "tensor");
  checkRoot(s, root, rootName);
  if (rootTensor != 0) failUsage(s, strCat("rootTensor ", rootTensor, " must be 0"));
  return static_cast<int>(root);
}

int checkRootedList(const CheckScope& s, const std::vector<at::Tensor>& single,
                    const char* singleName, int64_t root, const char* rootName,
                    const std::vector<std::vector<at::Tensor>>& lists, const char* item,
                    const char* sameSize) {
  checkSingle(s, single, singleName);
  checkRoot(s, root, rootName);
  if (s.rank == root) {
    checkPerRankList(s, lists, single[0], item, sameSize);
  } else if (!lists.empty() && !lists[0].empty()) {
    failUsage(s, strCat("only the root (rank ", root, ") may pass a ", item));
  }
  return static_cast<int>(root);
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const char* pa = static_cast<const char*>(a.data_ptr());
  const char* pb = static_cast<const char*>(b.data_ptr());
  const int64_t na = a.numel() * static_cast<int64_t>(a.element_size());
  const int64_t nb = b.numel() * static_cast<int64_t>(b.element_size());
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

void checkAllGatherAliasing(const CheckScope& s, const at::Tensor& input, const at::Tensor& output) {
  const int64_t blockBytes = input.numel() * static_cast<int64_t>(input.element_size());
  const char* ownBlock = static_cast<const char*>(output.data_ptr()) + blockBytes * s.rank;
  if (overlaps(input, output) && static_cast<const char*>(input.data_ptr()) != ownBlock) {
    failUsage(s, strCat("input overlaps the output but is not this rank's block (block ", s.rank,
                        " of ", s.size, "); pass a separate input or output.narrow() of block ",
                        s.rank));
  }
}

}  // namespace ring
