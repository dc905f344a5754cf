#include "transport/shm/peer_memory.h"

#include <cstring>

#include "common/errors.h"

namespace ring {

namespace {
// volatile: its one reader is another process, so the compiler must keep it in memory.
volatile const uint64_t probeWord = kPeerProbeValue;
}  // namespace

uint64_t peerProbeAddress() {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&probeWord));
}

std::string probePeerMemory(int pid, uint64_t probeAddress) {
  uint64_t seen = 0;
  const int err = readPeerMemory(pid, probeAddress, &seen, sizeof seen);
  if (err != 0) return strCat("process_vm_readv refused: ", std::strerror(err));
  if (seen != kPeerProbeValue) {
    return strCat("process_vm_readv read ", seen, " where the peer published ", kPeerProbeValue);
  }
  return "";
}

}  // namespace ring
