#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
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

ShmSegment ShmSegment::create(size_t bytes) {
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) == 0) {
    // tmpfs pages are only allocated when touched; a segment larger than the free space would
    // fault with SIGBUS mid-collective, so refuse it here with the numbers.
    unsigned long long freeBytes = static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize;
    if (freeBytes < bytes) {
      throw CommError(strCat("/dev/shm has ", freeBytes, " bytes free but the ring transport "
                             "needs ", bytes, " for this rank; enlarge /dev/shm (docker: "
                             "--shm-size) or lower TORCH_RING_SLOT_BYTES / TORCH_RING_SLOTS"));
    }
  }
  ShmSegment seg;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = randomName();
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    RING_SYSCHECK(fd, "shm_open(", name, ")");
    if (ftruncate(fd, static_cast<off_t>(bytes)) < 0) {
      int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      throw CommError(strCat("ftruncate of ", name, " to ", bytes, " bytes failed: ",
                             std::strerror(e)));
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
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  RING_SYSCHECK(fd, "shm_open(", name, ") of a peer's segment");
  struct stat st;
  if (fstat(fd, &st) < 0 || static_cast<size_t>(st.st_size) != bytes) {
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
