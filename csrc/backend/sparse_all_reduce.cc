#include "backend/sparse_all_reduce.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/errors.h"

namespace ring {
namespace {

// What each rank tells the others first, as int64: its sparse and dense dimension counts, its
// number of nonzeros, then its full shape (padded with -1).
constexpr int64_t kMaxDims = 16;
constexpr int64_t kSparseDims = 0, kDenseDims = 1, kNonzeros = 2, kShape = 3;
constexpr int64_t kHeader = kShape + kMaxDims;

std::string shapeOf(const int64_t* header) {
  std::string s = "[";
  const int64_t dims = header[kSparseDims] + header[kDenseDims];
  for (int64_t i = 0; i < dims; ++i) s += strCat(i ? ", " : "", header[kShape + i]);
  return strCat(s, "] (", header[kSparseDims], " sparse and ", header[kDenseDims],
                " dense dimensions)");
}

bool sameShape(const int64_t* a, const int64_t* b) {
  return std::equal(a + kSparseDims, a + kNonzeros, b + kSparseDims) &&
         std::equal(a + kShape, a + kHeader, b + kShape);
}

}  // namespace

DType checkSparseAllReduce(const CheckScope& s, const at::Tensor& t, const c10d::ReduceOp& op) {
  if (op.op_ != c10d::ReduceOp::SUM) {
    failUsage(s, "a sparse tensor is reduced with SUM only (the sum of the ranks' sparse tensors, "
                 "as gloo); reduce its dense form (.to_dense()) for another op");
  }
  if (!t.device().is_cpu()) {
    failUsage(s, strCat("a sparse tensor on ", t.device().str(), " is not supported; sparse "
                        "all_reduce runs on CPU tensors (move it with .cpu())"));
  }
  if (t.dim() > kMaxDims) {
    failUsage(s, strCat("a sparse tensor of ", t.dim(), " dimensions; at most ", kMaxDims,
                        " are supported"));
  }
  return toRingDType(s, t.scalar_type());
}

void sparseAllReduce(Communicator& comm, const CallInfo& c, const at::Tensor& t, DType values) {
  // On the runner's thread, outside autograd: the parts and their sum are plain data (a
  // gradient's sum, as in DDP), never recorded in a graph.
  at::AutoDispatchBelowADInplaceOrView belowAutograd;
  at::NoGradGuard noGrad;
  const int n = comm.size(), me = comm.rank();
  const at::Tensor mine = t.coalesce();

  at::Tensor header = at::full({kHeader}, -1, at::kLong);
  int64_t* h = header.data_ptr<int64_t>();
  h[kSparseDims] = mine.sparse_dim();
  h[kDenseDims] = mine.dense_dim();
  h[kNonzeros] = mine._nnz();
  for (int64_t i = 0; i < mine.dim(); ++i) h[kShape + i] = mine.size(i);
  at::Tensor headers = at::empty({n, kHeader}, at::kLong);
  comm.run(CollectiveArgs::allGather(kHeader, DType::Int64), header.data_ptr(), headers.data_ptr(),
           c);
  const int64_t* all = headers.data_ptr<int64_t>();
  int64_t widest = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t* theirs = all + r * kHeader;
    if (!sameShape(theirs, h)) {
      throw UsageError(strCat("ring: all_reduce on rank ", me, ": rank ", r,
                              "'s sparse tensor is ", shapeOf(theirs), ", this rank's is ",
                              shapeOf(h), "; every rank must pass a tensor of one shape"));
    }
    widest = std::max(widest, theirs[kNonzeros]);
  }

  // Indices [sparse dims, widest] and values [widest, dense shape...] per rank, zero-padded.
  const int64_t sparseDims = mine.sparse_dim(), nnz = mine._nnz();
  at::Tensor indices = at::zeros({sparseDims, widest}, at::kLong);
  indices.narrow(1, 0, nnz).copy_(mine._indices());
  std::vector<int64_t> valueShape = mine._values().sizes().vec();
  valueShape[0] = widest;
  at::Tensor vals = at::zeros(valueShape, mine._values().options());
  vals.narrow(0, 0, nnz).copy_(mine._values());
  at::Tensor allIndices = at::empty({n, sparseDims, widest}, at::kLong);
  comm.run(CollectiveArgs::allGather(indices.numel(), DType::Int64), indices.data_ptr(),
           allIndices.data_ptr(), c);
  std::vector<int64_t> gatheredShape = {n};
  gatheredShape.insert(gatheredShape.end(), valueShape.begin(), valueShape.end());
  at::Tensor allValues = at::empty(gatheredShape, vals.options());
  comm.run(CollectiveArgs::allGather(vals.numel(), values), vals.data_ptr(), allValues.data_ptr(),
           c);

  // Rank 0's part, then each next rank's added to it (uncoalesced parts are concatenated),
  // then one coalesce: gloo's order, so gloo's bits.
  at::Tensor sum;
  for (int r = 0; r < n; ++r) {
    const int64_t count = all[r * kHeader + kNonzeros];
    at::Tensor part = at::sparse_coo_tensor(allIndices[r].narrow(1, 0, count),
                                            allValues[r].narrow(0, 0, count), mine.sizes(),
                                            mine.options());
    if (r == 0) {
      sum = part;
    } else {
      sum.add_(part);
    }
  }
  t.copy_(sum.coalesce());
}

}  // namespace ring
