#include "backend/fr_dump_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include "backend/fr_dump.h"
#include "common/errors.h"
#include "common/knob_table.h"
#include "common/logging.h"

namespace ring {
namespace {

// Written by the handler, read by the dump thread: a signal handler may only call
// async-signal-safe functions, and pickling a dump allocates and takes locks, so the handler
// hands the work to a thread through a pipe (write(2) is async-signal-safe).
int gWakeFd = -1;
int gSignal = 0;
struct sigaction gPrevious;

void onDumpSignal(int sig, siginfo_t* info, void* context) {
  const int savedErrno = errno;
  const char byte = 1;
  // A full pipe means a dump is already pending: dropping this request loses nothing.
  (void)!write(gWakeFd, &byte, 1);
  errno = savedErrno;
  // A handler that was there before ours still runs (Python's, a profiler's); the default
  // action (for SIGUSR1, ending the process) does not, since asking for a dump must not kill.
  if (gPrevious.sa_flags & SA_SIGINFO) {
    if (gPrevious.sa_sigaction != nullptr) gPrevious.sa_sigaction(sig, info, context);
  } else if (gPrevious.sa_handler != SIG_DFL && gPrevious.sa_handler != SIG_IGN &&
             gPrevious.sa_handler != nullptr) {
    gPrevious.sa_handler(sig);
  }
}

void dumpOnEveryWake(int readFd, int globalRank) {
  const std::string path = strCat(knobTextOrDefault("TORCH_FR_DUMP_TEMP_FILE"), globalRank);
  char buf[64];
  for (;;) {
    const ssize_t n = read(readFd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    try {
      writeFlightRecorderDump(path);
      RING_LOG(kLogWarn, "flight recorder dump written to ", path, " on signal ", gSignal, " (",
               strsignal(gSignal), ")");
    } catch (const std::exception& e) {
      RING_LOG(kLogWarn, e.what(), " (dump asked for by signal ", gSignal, ")");
    }
  }
}

}  // namespace

int dumpSignalFromEnv(const char* value) {
  if (value == nullptr || *value == '\0') return 0;
  std::string name(value);
  int sig = 0;
  char* end = nullptr;
  const long number = std::strtol(value, &end, 10);
  if (end != value && *end == '\0') {
    sig = static_cast<int>(number);
  } else {
    if (name.rfind("SIG", 0) == 0) name = name.substr(3);
    // The signals a user would send by name to ask for a dump (sigabbrev_np needs glibc 2.32).
    static const std::pair<const char*, int> kNames[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},   {"INT", SIGINT},
        {"QUIT", SIGQUIT}, {"TERM", SIGTERM}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH},
        {"PWR", SIGPWR},   {"URG", SIGURG}};
    for (const auto& [abbrev, number] : kNames) {
      if (name == abbrev) sig = number;
    }
  }
  // SIGKILL and SIGSTOP cannot be caught; the signals that report a crash must keep theirs.
  if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV ||
      sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT) {
    throw RingError(strCat("ring: TORCH_RING_FR_DUMP_SIGNAL='", value,
                           "' is not a signal a flight-recorder dump can be asked with "
                           "(expected a name or number such as SIGUSR1, USR1 or 10)"));
  }
  return sig;
}

void armFlightRecorderDumpOnSignal(int globalRank) {
  static std::once_flag armed;
  std::call_once(armed, [globalRank] {
    const int sig = dumpSignalFromEnv(knobText("TORCH_RING_FR_DUMP_SIGNAL"));
    if (sig == 0) return;
    int fds[2];
    // Close-on-exec: a program the job starts keeps neither end. Non-blocking: the handler
    // must never block on a full pipe (the reader blocks on its own end regardless, since
    // O_NONBLOCK is cleared below for it).
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0 ||
        fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) & ~O_NONBLOCK) != 0) {
      throw RingError(strCat("ring: TORCH_RING_FR_DUMP_SIGNAL: pipe failed: ", strerror(errno)));
    }
    gWakeFd = fds[1];
    gSignal = sig;
    // The thread lives as long as the process, blocked in read(2) between signals.
    std::thread(dumpOnEveryWake, fds[0], globalRank).detach();
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = onDumpSignal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(sig, &action, &gPrevious) != 0) {
      throw RingError(strCat("ring: TORCH_RING_FR_DUMP_SIGNAL: cannot catch signal ", sig, ": ",
                             strerror(errno)));
    }
    RING_LOG(kLogInfo, "flight recorder dumps on signal ", sig, " (", strsignal(sig), ")");
  });
}

}  // namespace ring
