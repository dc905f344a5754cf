#include "backend/comm_profile.h"

#include <ATen/record_function.h>
#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>

namespace ring {
namespace {

// ProcessGroupNCCL's collective names in record_param_comms (what trace tools group by).
std::string ncclName(const std::string& collective) {
  if (collective == "all_reduce") return "allreduce";
  if (collective == "all_gather") return "all_gather";
  if (collective == "all_gather_into_tensor") return "_allgather_base";
  if (collective == "reduce_scatter_tensor") return "_reduce_scatter_base";
  if (collective == "all_to_all_single") return "all_to_allv";
  return collective;
}

int64_t elementsOf(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const at::Tensor& t : ts) n += t.numel();
  return n;
}

}  // namespace

std::tuple<int, int> globalRankLayout(const std::vector<uint64_t>& globalRanks, int size) {
  if (globalRanks.empty()) return {0, 1};  // the default group: global rank = group rank
  const int start = static_cast<int>(globalRanks[0]);
  if (globalRanks.size() < 2 || static_cast<int>(globalRanks.size()) != size) return {start, 0};
  const int64_t stride = static_cast<int64_t>(globalRanks[1]) - static_cast<int64_t>(globalRanks[0]);
  for (size_t i = 1; i < globalRanks.size(); ++i) {
    if (static_cast<int64_t>(globalRanks[i]) - static_cast<int64_t>(globalRanks[i - 1]) != stride) {
      return {start, 0};
    }
  }
  return {start, static_cast<int>(stride)};
}

std::unique_ptr<CommProfile> CommProfile::captureIfProfiling(
    const char* collective, uint64_t seq, const CommProfileGroup& group,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
    std::vector<int64_t> inSplitSizes, std::vector<int64_t> outSplitSizes) {
  if (!recording()) return nullptr;
  std::unique_ptr<CommProfile> p(new CommProfile());
  p->span_ = std::string("ring:") + collective;
  p->collective_ = ncclName(collective);
  p->seq_ = seq;
  p->group_ = group;
  p->inputs_ = inputs;
  p->outputs_ = outputs;
  p->inSplitSizes_ = std::move(inSplitSizes);
  p->outSplitSizes_ = std::move(outSplitSizes);
  p->inElements_ = elementsOf(inputs);
  p->outElements_ = elementsOf(outputs);
  const std::vector<at::Tensor>& typed = inputs.empty() ? outputs : inputs;
  if (!typed.empty()) p->dtype_ = typed[0].scalar_type();
  return p;
}

void CommProfile::run(const std::function<void()>& body) const {
  at::ThreadLocalStateGuard asTheCaller(callerState_);
  RECORD_FUNCTION(span_, std::vector<c10::IValue>());
  {
    // A scope of its own: both macros declare a guard of the same name. Their arguments are
    // named values, read more than once (so the name is a fresh string each time).
    const int64_t seq = static_cast<int64_t>(seq_);
    const std::tuple<std::string, std::string> pgName{group_.name, group_.desc};
    RECORD_PARAM_COMMS_DATA(seq, pgName, inputs_, outputs_, group_.rank, std::string(collective_),
                            inElements_, outElements_, dtype_, inSplitSizes_, outSplitSizes_,
                            group_.globalRankStart, group_.globalRankStride, group_.size);
    body();
  }
}

void recordPointToPoint(const char* name, const CommProfileGroup& group, const at::Tensor& data) {
  const int64_t seq = 0;  // point-to-point calls have no group sequence number here
  const std::tuple<std::string, std::string> pgName{group.name, group.desc};
  const std::vector<at::Tensor> tensors{data};
  const std::vector<int64_t> noSplits;
  RECORD_PARAM_COMMS_DATA(seq, pgName, tensors, tensors, group.rank, std::string(name),
                          data.numel(), data.numel(), data.scalar_type(), noSplits, noSplits,
                          group.globalRankStart, group.globalRankStride, group.size);
}

}  // namespace ring
