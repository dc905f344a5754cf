#include "transport/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/errors.h"

namespace ring {

std::string hostIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  // Processes in different IPC or PID namespaces cannot share /dev/shm segments or see each
  // other's pids, so the namespaces are part of what "same host" means here.
  struct stat ipc, pid;
  std::string ns;
  if (stat("/proc/self/ns/ipc", &ipc) == 0 && stat("/proc/self/ns/pid", &pid) == 0) {
    ns = strCat(ipc.st_ino, "/", pid.st_ino);
  }
  return strCat(host, "|", boot, "|", ns);
}

std::string machineOf(const std::string& identity) {
  return identity.substr(0, identity.rfind('|'));
}

}  // namespace ring
