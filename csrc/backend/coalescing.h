// What happens between startCoalescing and endCoalescing (torch's _coalescing_manager when it is
// given a device, and batch_isend_irecv): the calls that the group's worker would run are held
// back and issued at the end as ONE task - a single all_reduce over the concatenation when they
// are all all_reduces of one dtype and op, else the calls back to back in one task - so that N
// small calls cost one hand-off to the worker (and, for all_reduce, one ring pass) instead of N.
// Calls that do not go through the worker (CUDA ring kernels, point-to-point) run at once; the
// Work that endCoalescing returns covers everything issued in the block.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/host_call.h"
#include "backend/work_queue.h"

namespace ring {

class Coalescer {
 public:
  struct Held {
    const char* name;
    HostCall call;
    c10::intrusive_ptr<RingWork> work;  // what the caller got; completed with the block
  };
  struct Block {
    std::vector<Held> held;
    std::vector<c10::intrusive_ptr<c10d::Work>> started;  // ran at once (kernels, p2p)
  };

  // Whether a block is open: asked by every call, so inline.
  bool active() const { return open_.load(std::memory_order_acquire); }
  // Throws if a block is already open (torch opens one per group at a time).
  void begin(int rank);
  // While open: keeps `call` for the end of the block and returns its Work. That Work's wait()
  // returns at once while the block is open (torch's synchronous calls wait right away; the
  // call only runs when the block ends), and for real afterwards.
  c10::intrusive_ptr<c10d::Work> hold(int rank, const char* name, HostCall call);
  // While open: a Work of a call that already runs, to be covered by the block's Work.
  void include(const c10::intrusive_ptr<c10d::Work>& work);
  // Closes the block and hands over what it holds.
  Block end(int rank);

 private:
  mutable std::mutex mutex_;
  // Written under mutex_; read without it by active(), which every call asks (a lock there was
  // one more of a small call's dozen).
  std::atomic<bool> open_{false};
  std::shared_ptr<std::atomic<bool>> openFlag_;
  Block block_;
};

// A Work that completes when every one of `parts` has: wait() waits for each and raises the first
// error; the Future completes with every part's outputs, in order, once all have completed.
c10::intrusive_ptr<c10d::Work> allOf(int rank, c10d::OpType type,
                                     std::vector<c10::intrusive_ptr<c10d::Work>> parts);

// The held calls as one host call: `allReduceConcatenation` over every output if they are all
// all_reduces of one dtype and op (fuse), else each in turn through `runOne` (its body, or its
// collective through the group).
HostCall fuseHeld(const std::vector<Coalescer::Held>& held,
                  const std::function<void(const CallInfo&, const Tensors&, const AllReduceKey&)>&
                      allReduceConcatenation,
                  const std::function<void(const CallInfo&, const HostCall&)>& runOne);

}  // namespace ring
