// ShmSegment against what the kernel says about a segment: a peer's segment is accepted only when
// it is this user's and mode 0600 (a name in the store could point anywhere), and a segment that
// /dev/shm cannot hold fails at creation with the free space, not later with SIGBUS.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <string>

#include "common/errors.h"
#include "transport/shm/shm_segment.h"

namespace ring {
namespace {

constexpr size_t kBytes = 1 << 16;

// A segment made by hand, as a stranger would publish one; unlinked when the test ends.
struct ForeignSegment {
  std::string name = "/torch_ring_test_foreign_" + std::to_string(getpid());
  explicit ForeignSegment(mode_t mode) {
    shm_unlink(name.c_str());
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(ftruncate(fd, kBytes), 0);
    EXPECT_EQ(fchmod(fd, mode), 0);  // fchmod: the umask does not apply
    close(fd);
  }
  ~ForeignSegment() { shm_unlink(name.c_str()); }
};

std::string refusal(const std::string& name) {
  try {
    ShmSegment::open(name, kBytes);
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

TEST(ShmSegment, OwnSegmentsAre0600AndOpenable) {
  ShmSegment mine = ShmSegment::create(kBytes);
  int fd = shm_open(mine.name().c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  close(fd);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  // Every page is reserved at creation (posix_fallocate), not on first touch.
  EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, kBytes);
  ShmSegment peer = ShmSegment::open(mine.name(), kBytes);
  EXPECT_EQ(peer.size(), kBytes);
}

TEST(ShmSegment, ASegmentOthersMayOpenIsRefusedWithItsName) {
  for (mode_t mode : {0666, 0644, 0660, 0640, 0700}) {
    ForeignSegment foreign(mode);
    const std::string why = refusal(foreign.name);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    EXPECT_NE(why.find(foreign.name), std::string::npos) << why;
    EXPECT_NE(why.find(std::string("mode ") + octal), std::string::npos) << why;
    EXPECT_NE(why.find("mode 0600"), std::string::npos) << why;
  }
}

TEST(ShmSegment, ASegmentOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a segment to another uid";
  ForeignSegment foreign(0600);
  int fd = shm_open(foreign.name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchown(fd, 65534, 65534), 0) << std::strerror(errno);
  close(fd);
  const std::string why = refusal(foreign.name);
  EXPECT_NE(why.find("owned by uid 65534"), std::string::npos) << why;
  EXPECT_NE(why.find(foreign.name), std::string::npos) << why;
}

TEST(ShmSegment, MoreThanDevShmHoldsFailsAtCreationWithTheFreeSpace) {
  struct statvfs vfs;
  ASSERT_EQ(statvfs("/dev/shm", &vfs), 0);
  // Larger than the whole file system: the reservation fails at once, without touching memory.
  const size_t total = static_cast<size_t>(vfs.f_blocks) * vfs.f_frsize;
  const size_t bytes = total + (size_t{1} << 20);
  std::string why;
  try {
    ShmSegment::create(bytes);
  } catch (const CommError& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("bytes free but the ring transport needs " + std::to_string(bytes)),
            std::string::npos) << why;
  EXPECT_NE(why.find("--shm-size"), std::string::npos) << why;
}

}  // namespace
}  // namespace ring
