#include "reduce/reduce_table.h"

#include "common/errors.h"
#include "reduce/reduce_ops.h"

namespace ring {
namespace {

template <DType D, RedOp Op>
void combineHost(void* dst, const void* a, const void* b, int64_t count) {
  combineRange<D, Op>(dst, a, b, 0, count);
}
template <DType D>
void divideHost(void* data, int64_t divisor, int64_t count) {
  divideRange<D>(data, divisor, 0, count);
}
template <DType D>
void scaleHost(void* out, const void* in, double factor, int64_t count) {
  scaleRange<D>(out, in, factor, 0, count);
}

constexpr int kTypes = static_cast<int>(DType::kCount);
constexpr int kOps = static_cast<int>(RedOp::kCount);

struct Table {
  CombineFn combine[kTypes][kOps] = {};
  DivideFn divide[kTypes] = {};
  ScaleFn scale[kTypes] = {};
  Table() {
#define RING_ADD_OP(OP) \
  combine[static_cast<int>(kType)][static_cast<int>(RedOp::OP)] = &combineHost<kType, RedOp::OP>;
#define RING_ADD_TYPE(TYPE)                                        \
  {                                                                \
    constexpr DType kType = DType::TYPE;                           \
    RING_FOR_EACH_OP(RING_ADD_OP)                                  \
    divide[static_cast<int>(kType)] = &divideHost<kType>;          \
    scale[static_cast<int>(kType)] = &scaleHost<kType>;            \
  }
    RING_FOR_EACH_DTYPE(RING_ADD_TYPE)
#undef RING_ADD_TYPE
#undef RING_ADD_OP
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

CombineFn combineFn(DType t, RedOp op) {
  RING_ASSERT(opSupported(t, op), dtypeName(t), " x ", redOpName(op));
  return table().combine[static_cast<int>(t)][static_cast<int>(op)];
}
DivideFn divideFn(DType t) { return table().divide[static_cast<int>(t)]; }
ScaleFn scaleFn(DType t) { return table().scale[static_cast<int>(t)]; }

}  // namespace ring
