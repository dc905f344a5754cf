// Reading another process's memory on this host (process_vm_readv): how a rank copies a ring
// message straight out of its sender's buffer, once, instead of out of a slot the sender first
// copied it into (shm_transport.h, single-copy messages).
//
// Why a probe: the kernel refuses such reads where the reader may not trace the owner (Yama's
// ptrace_scope, another user, a process that made itself undumpable) or where a seccomp
// profile forbids the system call (Docker's default one does, without CAP_SYS_PTRACE). A
// receiver learns which at set-up by reading a known word of each sender's, and a sender lends
// its memory only to receivers that could.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace ring {

// The word every process publishes the address of (SegmentHeader::probeAddress), and its value.
constexpr uint64_t kPeerProbeValue = 0x73696e676c652d31ull;  // "single-1"
uint64_t peerProbeAddress();

// Copies `bytes` from address `remote` of process `pid` into `dst`. Returns 0, or the errno of
// the read that failed (ESRCH: the process is gone; EPERM: not allowed; EFAULT: the address is
// not mapped there; ENOSYS: no such call). A short read (the kernel stops at a page it cannot
// reach) is resumed where it stopped. Inline: a large call's every lent message comes here.
inline int readPeerMemory(int pid, uint64_t remote, void* dst, int64_t bytes) {
  char* to = static_cast<char*>(dst);
  int64_t done = 0;
  while (done < bytes) {
    iovec local{to + done, static_cast<size_t>(bytes - done)};
    iovec theirs{reinterpret_cast<void*>(static_cast<uintptr_t>(remote + done)),
                 static_cast<size_t>(bytes - done)};
    const ssize_t got = process_vm_readv(static_cast<pid_t>(pid), &local, 1, &theirs, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    // Nothing read of a non-empty request: the first page cannot be read, and asking again
    // would not change that.
    if (got == 0) return EFAULT;
    done += got;
  }
  return 0;
}

// Whether this process may read `pid`'s memory: "" where the word at `probeAddress` reads as
// kPeerProbeValue, else why not ("process_vm_readv refused: Operation not permitted").
std::string probePeerMemory(int pid, uint64_t probeAddress);

}  // namespace ring
