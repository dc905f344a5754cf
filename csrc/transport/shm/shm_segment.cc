#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/errors.h"

namespace ring {
namespace {

std::string randomName() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    RING_SYSCHECK(n, "getrandom for a shared-memory name");
    got += static_cast<size_t>(n);
  }
  std::string name = "/torch_ring_";
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    name += hex;
  }
  return name;
}

void* mapShared(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    throw CommError(strCat("mmap of shared-memory segment ", name, " (", bytes,
                           " bytes) failed: ", std::strerror(e)));
  }
  return p;
}

}  // namespace

int64_t shmFreeBytes() {
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

namespace {

// Runs `allocate` with the calling thread preferring NUMA node `node` for new pages, then puts
// its policy back. Why the thread's policy and not mbind on the mapping: the pages are
// allocated by posix_fallocate before the segment is mapped. Through syscall(): glibc has no
// wrapper (libnuma's are the usual ones). Returns what came of it, for the log.
template <typename F>
std::string allocateOnNode(int node, F&& allocate) {
  constexpr unsigned long kMaxNodes = 1024;  // bits in the masks below
  unsigned long mask[kMaxNodes / 64] = {};
  unsigned long oldMask[kMaxNodes / 64] = {};
  if (node < 0 || node >= static_cast<int>(kMaxNodes)) {
    allocate();
    return strCat("NUMA node ", node, " is out of range: placed by the kernel's default");
  }
  mask[node / 64] |= 1UL << (node % 64);
  int oldMode = MPOL_DEFAULT;
  // maxnode is one more than the bits given: the kernel reads one bit fewer than it is told.
  if (syscall(SYS_get_mempolicy, &oldMode, oldMask, kMaxNodes + 1, nullptr, 0) != 0) {
    oldMode = MPOL_DEFAULT;
  }
  if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, kMaxNodes + 1) != 0) {
    const int e = errno;
    allocate();
    return strCat("preferring NUMA node ", node, " was refused (", std::strerror(e),
                  "): placed by the kernel's default");
  }
  // The thread's own policy back, however the allocation ends.
  struct PutBack {
    int mode;
    const unsigned long* mask;
    ~PutBack() {
      syscall(SYS_set_mempolicy, mode, mode == MPOL_DEFAULT ? nullptr : mask,
              mode == MPOL_DEFAULT ? 0 : kMaxNodes + 1);
    }
  } putBack{oldMode, oldMask};
  allocate();
  return strCat("on NUMA node ", node);
}

}  // namespace

ShmSegment ShmSegment::create(size_t bytes, int preferredNode, std::string* placement) {
  ShmSegment seg;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = randomName();
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    RING_SYSCHECK(fd, "shm_open(", name, ")");
    // Exactly 0600 whatever the umask: the peers refuse any other mode (see open()).
    if (fchmod(fd, 0600) < 0) {
      int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      throw CommError(strCat("fchmod of shared-memory segment ", name, " failed: ",
                             std::strerror(e)));
    }
    // Reserve every page now: tmpfs allocates on first touch, so a segment larger than the free
    // space would otherwise fault with SIGBUS in the middle of a collective. posix_fallocate
    // fails here instead, where the error can say why.
    int e = 0;
    auto reserve = [&] { e = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); };
    if (preferredNode >= 0) {
      const std::string placed = allocateOnNode(preferredNode, reserve);
      if (placement != nullptr) *placement = placed;
    } else {
      reserve();
    }
    if (e != 0) {
      close(fd);
      shm_unlink(name.c_str());
      if (e == ENOSPC) {
        throw CommError(strCat("/dev/shm has ", shmFreeBytes(), " bytes free but the ring "
                               "transport needs ", bytes, " for this rank's segment ", name,
                               "; enlarge /dev/shm (docker: --shm-size), lower "
                               "TORCH_RING_SLOT_BYTES / TORCH_RING_SLOTS or unset them (set-up "
                               "then fits the slots to the free space), or lower "
                               "TORCH_RING_SHM_BUDGET"));
      }
      throw CommError(strCat("posix_fallocate of shared-memory segment ", name, " to ", bytes,
                             " bytes failed: ", std::strerror(e)));
    }
    seg.name_ = name;
    seg.owner_ = true;
    seg.linked_ = true;
    try {
      seg.data_ = mapShared(fd, bytes, name);
    } catch (...) {
      shm_unlink(name.c_str());
      throw;
    }
    close(fd);
    seg.size_ = bytes;
    return seg;
  }
  throw CommError("could not find an unused shared-memory name after 8 attempts");
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR | O_NOFOLLOW, 0600);
  RING_SYSCHECK(fd, "shm_open(", name, ") of a peer's segment");
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    throw CommError(strCat("fstat of peer segment ", name, " failed: ", std::strerror(e)));
  }
  // The name comes from the store, which anyone who reaches it can write. Peers of one job run
  // as one user and create their segments 0600: a segment of another owner, or one others may
  // open, is not a peer's, and this rank would send its data into it and reduce forged data.
  const unsigned mode = st.st_mode & 07777;
  if (st.st_uid != geteuid() || mode != 0600) {
    close(fd);
    char have[8], want[8];
    std::snprintf(have, sizeof have, "%04o", mode);
    std::snprintf(want, sizeof want, "%04o", 0600u);
    throw CommError(strCat("peer segment ", name, " is owned by uid ", st.st_uid, " with mode ",
                           have, "; a peer's segment is owned by this process's uid ", geteuid(),
                           " with mode ", want, ": refusing it (the store may hold a name "
                           "published by someone else)"));
  }
  if (static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    throw CommError(strCat("peer segment ", name, " has ", st.st_size, " bytes, expected ",
                           bytes, ": ranks disagree about TORCH_RING_SLOT_BYTES/SLOTS?"));
  }
  ShmSegment seg;
  seg.name_ = name;
  seg.data_ = mapShared(fd, bytes, name);
  close(fd);
  seg.size_ = bytes;
  return seg;
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    owner_ = std::exchange(o.owner_, false);
    linked_ = std::exchange(o.linked_, false);
  }
  return *this;
}

void ShmSegment::unlink() {
  if (owner_ && linked_) {
    shm_unlink(name_.c_str());
    linked_ = false;
  }
}

ShmSegment::~ShmSegment() {
  unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
}

}  // namespace ring
