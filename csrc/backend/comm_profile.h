// What torch's profiler sees of a host collective: a `ring:<collective>` span on the thread that
// runs it (the group's worker or the caller), from when it starts moving data to its end, as
// ProcessGroupGloo's `gloo:<collective>` spans; and inside it torch's `record_param_comms`
// event with ProcessGroupNCCL's metadata (collective name, element counts in and out, dtype,
// split sizes, group name and description, group size, sequence number), which Chrome traces,
// execution traces and Holistic Trace Analysis read.
//
// Why the caller's profiler state travels with the call: torch's profiler registers its
// callbacks per thread, so a span recorded on the worker thread is seen only under the
// caller's thread-local state (as the autograd engine's threads propagate it). It is captured
// at issue and only while some RecordFunction callback is active: a call made without a
// profiler allocates nothing here.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace ring {

// Who the collective belongs to, as record_param_comms names it.
struct CommProfileGroup {
  std::string name;  // the group's uid (torch's group name)
  std::string desc;  // its description ("default_pg", "undefined")
  int rank = 0;
  int size = 1;
  int globalRankStart = 0;   // the first global rank of the group
  int globalRankStride = 1;  // 0 when the group's global ranks are not evenly spaced
};

class CommProfile {
 public:
  // Whether a profiler (any RecordFunction callback) records on this thread: asked before a
  // call gathers what captureIfProfiling needs (its group's names), which costs more than the
  // whole check when nothing records. Inline: every call asks.
  static bool recording() { return at::hasCallbacks(); }
  // Null unless a profiler is recording on this thread (recording()).
  static std::unique_ptr<CommProfile> captureIfProfiling(
      const char* collective, uint64_t seq, const CommProfileGroup& group,
      const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
      std::vector<int64_t> inSplitSizes = {}, std::vector<int64_t> outSplitSizes = {});

  // Runs `body` on this thread under the caller's profiler state, inside the two events.
  void run(const std::function<void()>& body) const;

 private:
  CommProfile() = default;
  at::ThreadLocalState callerState_;
  std::string span_;        // "ring:all_reduce"
  std::string collective_;  // "allreduce": ProcessGroupNCCL's names
  uint64_t seq_ = 0;
  CommProfileGroup group_;
  std::vector<at::Tensor> inputs_, outputs_;
  std::vector<int64_t> inSplitSizes_, outSplitSizes_;
  int64_t inElements_ = 0, outElements_ = 0;
  at::ScalarType dtype_ = at::kByte;
};

// A send or receive (`name`: "send" or "recv"), while a profiler records: its
// record_param_comms event on the posting thread, as ProcessGroupNCCL records one at enqueue.
// The span of its transfer is the Work's (RingWork's profiling title).
void recordPointToPoint(const char* name, const CommProfileGroup& group, const at::Tensor& data);

// Global ranks -> (start, stride) as record_param_comms reports them (stride 0: uneven).
std::tuple<int, int> globalRankLayout(const std::vector<uint64_t>& globalRanks, int size);

}  // namespace ring
