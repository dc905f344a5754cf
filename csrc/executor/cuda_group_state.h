// What the CUDA ring tasks of one group share, and may outlive the engine through (a user can
// keep a Work after destroy_process_group): the links (inbox memory, abort word, error record)
// and the way back to the rest of the group - its health, its other ranks, its flight recorder -
// which goes through CudaGroupHooks, so that this layer needs neither torch nor a particular
// communicator. Torch-free; CUDA runtime only (through the links).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "transport/cuda_ipc/cuda_ring_links.h"

namespace ring {

class Communicator;
class FlightRecorder;

// The group around the CUDA links. Every member may be empty (then it does nothing, or reports
// a healthy group).
struct CudaGroupHooks {
  // Throws CommError if the group is broken, aborted, or lost a rank (a peer's failure shows
  // here: that is how one rank's watchdog learns that another's stopped).
  std::function<void()> checkHealth;
  // Tells the other ranks that the group broke, and fails this rank's other calls with it.
  std::function<void(const std::string& reason)> markBroken;
  // Flight recorder: a collective handed to the GPU (returns its entry's id), and its end.
  std::function<uint64_t(uint64_t seq, const std::string& collective, const std::string& detail)>
      recordQueued;
  std::function<void(uint64_t id, const std::string& error)> recordEnded;
};

// The hooks of a group whose host side is `comm` (its transport carries the broken state to
// the peers) and whose history is `recorder`. Both must outlive the hooks' use: the engine
// detaches the hooks when it shuts down.
CudaGroupHooks communicatorHooks(Communicator& comm, FlightRecorder& recorder);

class CudaGroupState {
 public:
  CudaGroupState(std::unique_ptr<CudaRingLinks> links, CudaGroupHooks hooks, int rank, int size);
  CudaRingLinks& links() { return *links_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The first failure wins: stops this rank's kernels (abort word), keeps the inbox allocated
  // (a peer's kernel may still write into it) and marks the group broken, so that every other
  // rank's watchdog stops its kernels too and every rank's next collective raises.
  void breakGroup(const std::string& reason);
  // The first failure, or "" while healthy.
  std::string brokenReason() const;
  // Throws CommError if this rank's group is broken, aborted, or lost a rank.
  void checkHealth();

  uint64_t recordQueued(uint64_t seq, const std::string& name, const std::string& detail);
  void recordEnded(uint64_t id, const std::string& error);
  // Called when the engine goes: no more calls into the hooks (the communicator and recorder
  // they point to may go next).
  void detach();

 private:
  std::unique_ptr<CudaRingLinks> links_;
  const int rank_;
  const int size_;
  mutable std::mutex mutex_;
  CudaGroupHooks hooks_;
  std::string broken_;
};

}  // namespace ring
