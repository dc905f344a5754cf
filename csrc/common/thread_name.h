// Names the calling thread, so that top -H, gdb, py-spy and /proc/<pid>/task/*/comm show which
// of this library's threads is which ("ring-worker", "ring-tcp-io", ...), and tests can count
// the threads a group leaves behind.
#pragma once

#include <pthread.h>

namespace ring {

// Linux keeps at most 15 characters; longer names are cut there.
inline void nameThisThread(const char* name) {
  char shortName[16] = {0};
  for (int i = 0; i < 15 && name[i] != '\0'; ++i) shortName[i] = name[i];
  pthread_setname_np(pthread_self(), shortName);
}

}  // namespace ring
