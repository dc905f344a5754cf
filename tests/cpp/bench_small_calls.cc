// What the shared-memory transport alone costs a small all_reduce or barrier, below torch (with
// the issue announcement and the wait for the peers' that the backend makes around each call):
// rank processes (fork), each with two groups, one moving small messages through the FIFOs
// (TORCH_RING_LL_BYTES=0) and one through mailbox rounds, timed in alternating blocks so that
// both meet the cores in the same state (a core's speed changes for seconds at a time on the
// machines this runs on: docs/notes/latency_cpu.md).
//
//   ring_small_call_bench [--post-first] [ranks=2] [blocks=200] [calls per block=500]
//                         [sizes...=8 4096]
//
// Prints, per size and path, the median, p10 and p90 over blocks of the mean time per call in
// ns, and the ratio of the two paths' medians. The number of calls is bounded; it ends by
// itself. A size of 0 is a barrier.
//
// --post-first compares two orders on the mailbox group instead: "asked" announces the call,
// waits for the peers' announcements, then runs it (post and read); "posted" announces it,
// posts its message (Communicator::prepare, post), waits for the announcements, then runs the
// rest, as the backend does for a small all_reduce or barrier (backend/work_queue.h).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collective_calls.h"
#include "executor/communicator.h"
#include "shared_memory_store.h"

namespace {

using ring::CallInfo;
using ring::CollectiveArgs;
using ring::CommOptions;
using ring::Communicator;
using ring::DType;
using ring::PreparedCall;
using ring::RedOp;
using ring::testing_support::runAllReduce;
using ring::testing_support::runBarrier;
using Clock = std::chrono::steady_clock;

CommOptions options(const char* name, int64_t mailboxBytes) {
  CommOptions o;
  o.timeout = std::chrono::seconds(60);
  o.groupName = name;
  o.transport = "shm";
  o.mailboxBytes = mailboxBytes;
  return o;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const char* program = argv[0];
  const bool postFirst = argc > 1 && std::string(argv[1]) == "--post-first";
  if (postFirst) {
    --argc;
    ++argv;
  }
  const char* names[2] = {postFirst ? "asked" : "fifo", postFirst ? "posted" : "mailbox"};
  const int n = argc > 1 ? std::atoi(argv[1]) : 2;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 200;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 500;
  std::vector<int64_t> sizes;
  for (int i = 4; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {8, 4096};
  if (n < 2 || blocks < 1 || calls < 1) {
    std::fprintf(stderr, "usage: %s [--post-first] [ranks>=2] [blocks] [calls per block] [sizes...]\n",
                 program);
    return 2;
  }
  ring::testing_support::SharedMemoryStore fifoStore, mailboxStore;
  // Rank 0's block means, per size and path, through a pipe.
  int pipeFds[2];
  if (pipe(pipeFds) != 0) return 1;
  std::vector<pid_t> children;
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = fork();
    if (pid != 0) {
      children.push_back(pid);
      continue;
    }
    close(pipeFds[0]);
    // Path 0's group: the FIFOs, or (--post-first) a second mailbox group.
    Communicator first(fifoStore, rank, n, options("first", postFirst ? 64 * 1024 : 0));
    Communicator mailbox(mailboxStore, rank, n, options("mailbox", 64 * 1024));
    uint64_t seq[2] = {0, 0};
    std::vector<float> data;
    auto call = [&](Communicator& c, int64_t bytes, const CallInfo& info) {
      if (bytes == 0) {
        runBarrier(c, info);
      } else {
        runAllReduce(c, data.data(), bytes / 4, DType::Float32, RedOp::Sum, 1.0, info);
      }
    };
    auto run = [&](int path, int64_t bytes, int count) {
      Communicator& c = path == 0 ? first : mailbox;
      const bool postAhead = postFirst && path == 1;
      for (int i = 0; i < count; ++i) {
        const CallInfo info{seq[path]++, std::chrono::seconds(60)};
        // What the backend does around every call (backend/ring_backend.cc): announce it, and
        // look for every peer's announcement (the backend hands the call to its worker thread
        // when that takes too long; here it runs on regardless).
        c.announceIssued(info.seq + 1);
        PreparedCall prepared;
        CallInfo planned = info;
        bool posted = false;
        if (postAhead) {
          prepared = c.prepare(bytes == 0 ? CollectiveArgs::barrier()
                                          : CollectiveArgs::allReduce(bytes / 4, DType::Float32,
                                                                      RedOp::Sum, 1.0),
                               info.seq);
          posted = c.post(prepared, data.data(), data.data());
          planned.prepared = &prepared;
        }
        (void)c.allIssued(info.seq + 1, std::chrono::microseconds(500),
                          posted ? &prepared : nullptr);
        call(c, bytes, planned);
      }
    };
    for (int64_t bytes : sizes) {
      data.assign(static_cast<size_t>(std::max<int64_t>(bytes / 4, 1)), 1.0f);
      run(0, bytes, 2000);
      run(1, bytes, 2000);
      for (int b = 0; b < blocks; ++b) {
        for (int path = 0; path < 2; ++path) {
          // Values stay small: every call adds n x the last, so start each block afresh.
          std::fill(data.begin(), data.end(), 0.0f);
          const auto start = Clock::now();
          run(path, bytes, calls);
          const double ns =
              std::chrono::duration<double, std::nano>(Clock::now() - start).count() / calls;
          if (rank == 0 && write(pipeFds[1], &ns, sizeof ns) != sizeof ns) _exit(1);
        }
      }
    }
    _exit(0);
  }
  close(pipeFds[1]);
  std::printf("%d ranks, %d blocks of %d calls per path and size (ns per call, block means)\n", n,
              blocks, calls);
  std::printf("%8s %8s %10s %10s %10s\n", "bytes", "path", "median", "p10", "p90");
  bool ok = true;
  for (int64_t bytes : sizes) {
    std::vector<double> means[2];
    for (int b = 0; b < blocks && ok; ++b) {
      for (int path = 0; path < 2; ++path) {
        double ns = 0;
        ok = read(pipeFds[0], &ns, sizeof ns) == sizeof ns;
        means[path].push_back(ns);
      }
    }
    if (!ok) break;
    for (int path = 0; path < 2; ++path) {
      std::printf("%8lld %8s %10.0f %10.0f %10.0f\n", static_cast<long long>(bytes),
                  names[path], quantile(means[path], 0.5), quantile(means[path], 0.1),
                  quantile(means[path], 0.9));
    }
    std::printf("%8lld %s/%s (medians): %.2f\n", static_cast<long long>(bytes), names[0],
                names[1], quantile(means[0], 0.5) / quantile(means[1], 0.5));
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  if (!ok || failed > 0) {
    std::fprintf(stderr, "%d rank(s) failed\n", failed);
    return 1;
  }
  return 0;
}
