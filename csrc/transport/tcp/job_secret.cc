#include "transport/tcp/job_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/errors.h"
#include "common/knob_table.h"

namespace ring {
namespace {

std::string readSecretFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw UsageError(strCat("TORCH_RING_SECRET_FILE='", path, "' cannot be opened: ",
                            std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw UsageError(strCat("TORCH_RING_SECRET_FILE='", path, "' is not a regular file"));
  }
  // A secret others can read is no secret; one others can write lets them pick it.
  if ((st.st_mode & 077) != 0) {
    close(fd);
    throw UsageError(strCat("TORCH_RING_SECRET_FILE='", path, "' has mode 0", std::oct,
                            (st.st_mode & 0777), std::dec,
                            ": other users can read or change it; chmod 600 it"));
  }
  std::string secret;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      throw UsageError(strCat("TORCH_RING_SECRET_FILE='", path, "' cannot be read: ",
                              std::strerror(e)));
    }
    if (n == 0) break;
    secret.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  // Files written by editors and `echo` end in a newline that is not part of the secret.
  if (!secret.empty() && secret.back() == '\n') {
    secret.pop_back();
    if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  }
  if (secret.empty()) {
    throw UsageError(strCat("TORCH_RING_SECRET_FILE='", path, "' is empty"));
  }
  return secret;
}

}  // namespace

std::string readJobSecret() {
  // Read raw, not with the default: a secret set but empty is an error, not "no secret".
  const char* inline_ = knobText("TORCH_RING_SECRET");
  const char* file = knobText("TORCH_RING_SECRET_FILE");
  bool hasInline = inline_ != nullptr, hasFile = file != nullptr && *file != '\0';
  if (hasInline && hasFile) {
    throw UsageError("TORCH_RING_SECRET and TORCH_RING_SECRET_FILE are both set: set one");
  }
  if (hasFile) return readSecretFile(file);
  if (!hasInline) return std::string();
  if (*inline_ == '\0') {
    throw UsageError("TORCH_RING_SECRET is set but empty: unset it, or give it a value");
  }
  return inline_;
}

}  // namespace ring
