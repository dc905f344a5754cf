#include "emulated_ring_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <tuple>

#include "comm_test_support.h"
#include "common/errors.h"
#include "executor/communicator.h"
#include "executor/cuda_errors.h"
#include "float16_reference.h"
#include "memory_store.h"
#include "protocol/message_header.h"
#include "rank_threads.h"

namespace ring {
namespace testing_support {
namespace {

using Clock = std::chrono::steady_clock;

int64_t inputElements(const EmulatedCase& c, int world) {
  return c.kind == Collective::ReduceScatter ? c.count * world : c.count;
}
int64_t outputElements(const EmulatedCase& c, int world) {
  return c.kind == Collective::AllGather ? c.count * world : c.count;
}

RingWaitLimits testLimits() { return RingWaitLimits{15ull * 1000 * 1000 * 1000}; }

Fingerprint fingerprintOf(const EmulatedCase& c, uint64_t seq) {
  return makeFingerprint(c.kind, seq, c.count, c.dtype, reduces(c.kind) ? c.op : RedOp::Sum,
                         c.kind == Collective::Broadcast ? c.root : -1);
}

// The same collective through the CPU executor, on host buffers.
std::vector<char> cpuResult(const EmulatedCase& c, uint64_t seq, int rank, int world,
                            Communicator& comm, const std::vector<char>& input) {
  const size_t es = elementSize(c.dtype);
  const double factor = c.op == RedOp::PreMulSum ? kPreMulFactor : 1.0;
  std::vector<char> out(static_cast<size_t>(outputElements(c, world)) * es + 1);
  std::vector<char> in = input;
  const CallInfo info = call(seq);
  switch (c.kind) {
    case Collective::AllReduce:
      std::memcpy(out.data(), in.data(), in.size());
      runAllReduce(comm, out.data(), c.count, c.dtype, c.op, factor, info);
      break;
    case Collective::ReduceScatter:
      runReduceScatter(comm, in.data(), out.data(), c.count, c.dtype, c.op, factor, info);
      break;
    case Collective::AllGather:
      runAllGather(comm, in.data(), out.data(), c.count, c.dtype, info);
      break;
    default:
      std::memcpy(out.data(), in.data(), in.size());
      runBroadcast(comm, out.data(), c.count, c.dtype, c.root, info);
      break;
  }
  (void)rank;
  out.resize(static_cast<size_t>(outputElements(c, world)) * es);
  return out;
}

std::string cudaText(const char* what, cudaError_t e) {
  return strCat(what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

}  // namespace

std::string describeCase(const EmulatedCase& c) {
  return strCat(collectiveName(c.kind), " ", dtypeName(c.dtype), " op ", redOpName(c.op),
                " count ", c.count, " offset ", c.offset, c.inPlace ? " in place" : "", " root ",
                c.root);
}

int combinationCount() { return static_cast<int>(kernelCombinations().size()); }

std::vector<EmulatedCase> casesFor(int world, int part, int parts) {
  const int64_t counts[] = {0, 1, world + 1, 1009, 2503};
  std::vector<EmulatedCase> out;
  const auto all = kernelCombinations();
  for (size_t g = 0; g < all.size(); ++g) {
    if (static_cast<int>(g % static_cast<size_t>(parts)) != part) continue;
    EmulatedCase c;
    std::tie(c.kind, c.dtype, c.op) = all[g];
    c.count = counts[(g / static_cast<size_t>(parts) + static_cast<size_t>(world)) % 5];
    c.root = static_cast<int>(g % static_cast<size_t>(world));
    c.inPlace = c.kind == Collective::AllGather && (g / 3) % 2 == 1;
    c.offset = static_cast<int>(g % 3);
    out.push_back(c);
  }
  return out;
}

CudaLinkOptions linkOptions(int device, const FifoGeometry& g) {
  CudaLinkOptions o;
  o.device = device;
  o.geometry = g;
  o.hostId = "emulated-host";
  o.timeout = std::chrono::seconds(20);
  return o;
}

std::vector<char> inputFor(const EmulatedCase& c, int world, uint64_t id, int rank) {
  const int64_t count = inputElements(c, world);
  const size_t es = elementSize(c.dtype);
  std::vector<char> data(static_cast<size_t>(count) * es + 1);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t h = mix(id * 1000003u + static_cast<uint64_t>(rank) * 7919u +
                           static_cast<uint64_t>(i));
    char* at = data.data() + i * static_cast<int64_t>(es);
    double v = (static_cast<double>(h % 200001) - 100000.0) / 1024.0;
    if (c.op == RedOp::Product) v = 1.0 + (static_cast<double>(h % 201) - 100.0) / 997.0;
    switch (c.dtype) {
      case DType::Float32:
      case DType::Float64:
      case DType::Float16:
      case DType::BFloat16:
      case DType::Float8E4M3:
      case DType::Float8E5M2:
        storeElement(c.dtype, at, 0, v);  // rounds to the dtype, as a tensor's values are
        break;
      case DType::Bool:
        *at = static_cast<char>(h & 1);
        break;
      default:  // integers: any bit pattern (sums and products wrap, as torch's do)
        std::memcpy(at, &h, es);
        break;
    }
  }
  return data;
}

bool finishOrAbort(CudaRingLinks& links, cudaStream_t stream, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (cudaStreamQuery(stream) == cudaErrorNotReady) {
    if (Clock::now() > deadline) {
      links.requestAbort();
      (void)cudaStreamSynchronize(stream);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cudaStreamSynchronize(stream) == cudaSuccess;
}

std::string launchCase(const EmulatedCase& c, uint64_t seq, int rank, int world,
                       CudaRingLinks& links, ChannelCounters* counters, cudaStream_t stream,
                       const std::vector<char>& input, std::vector<char>* out) {
  const size_t es = elementSize(c.dtype);
  const int64_t inElems = inputElements(c, world), outElems = outputElements(c, world);
  const size_t pad = static_cast<size_t>(c.offset) * es;
  char* outBase = nullptr;
  char* inBase = nullptr;
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&outBase),
                                 static_cast<size_t>(outElems) * es + pad + 16)) {
    return cudaText("cudaMalloc", e);
  }
  char* outPtr = outBase + pad;
  char* in = nullptr;
  if (c.kind == Collective::AllReduce || c.kind == Collective::Broadcast) {
    in = outPtr;
  } else if (c.kind == Collective::AllGather && c.inPlace) {
    in = outPtr + static_cast<int64_t>(rank) * c.count * static_cast<int64_t>(es);
  } else {
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&inBase),
                                   static_cast<size_t>(inElems) * es + pad + 16)) {
      (void)cudaFree(outBase);
      return cudaText("cudaMalloc", e);
    }
    in = inBase + pad;
  }
  std::string error;
  cudaError_t e = cudaMemcpyAsync(in, input.data(), static_cast<size_t>(inElems) * es,
                                  cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) error = cudaText("cudaMemcpyAsync in", e);
  const double factor = c.op == RedOp::PreMulSum ? kPreMulFactor : 1.0;
  const Fingerprint fp = fingerprintOf(c, seq);
  if (error.empty()) {
    const RingCudaPeers& peers = links.peers();
    switch (c.kind) {
      case Collective::AllReduce:
        error = launchAllReduce(peers, counters, outPtr, c.count, c.dtype, c.op, factor, fp,
                                testLimits(), stream);
        break;
      case Collective::ReduceScatter:
        error = launchReduceScatter(peers, counters, in, outPtr, c.count, c.dtype, c.op, factor,
                                    fp, testLimits(), stream);
        break;
      case Collective::AllGather:
        error = launchAllGather(peers, counters, in, outPtr, c.count, c.dtype, fp, testLimits(),
                                stream);
        break;
      default:
        error = launchBroadcast(peers, counters, outPtr, c.count, c.dtype, c.root, fp,
                                testLimits(), stream);
        break;
    }
  }
  out->assign(static_cast<size_t>(outElems) * es, '\0');
  if (error.empty() && outElems > 0) {
    e = cudaMemcpyAsync(out->data(), outPtr, out->size(), cudaMemcpyDeviceToHost, stream);
    if (e != cudaSuccess) error = cudaText("cudaMemcpyAsync out", e);
  }
  if (!finishOrAbort(links, stream, std::chrono::seconds(20)) && error.empty()) {
    error = "the collective did not finish within 20 s (aborted)";
  }
  // Read only now that the stream has finished: then the record is complete.
  if (error.empty()) error = explainDeviceStop(links.errorRecord(), rank);
  (void)cudaFree(outBase);
  (void)cudaFree(inBase);
  return error;
}

std::vector<std::string> runRankCases(Store& store, int rank, int world, int device,
                                      const FifoGeometry& g,
                                      const std::vector<EmulatedCase>& cases,
                                      std::string* linkDescription,
                                      std::chrono::milliseconds startDelay) {
  std::vector<std::string> failures;
  if (cudaError_t e = cudaSetDevice(device)) return {cudaText("cudaSetDevice", e)};
  CudaRingLinks links(store, rank, world, linkOptions(device, g));
  if (linkDescription != nullptr) *linkDescription = links.describe();
  if (!links.usable()) return {strCat("rank ", rank, ": links declined: ", links.declineReason())};
  Communicator comm(store, rank, world, smallSlotOptions());
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) {
    return {cudaText("cudaStreamCreateWithFlags", e)};
  }
  std::this_thread::sleep_for(startDelay);
  ChannelCounters counters{};
  for (size_t k = 0; k < cases.size(); ++k) {
    const EmulatedCase& c = cases[k];
    const uint64_t id = static_cast<uint64_t>(k) * 31 + static_cast<uint64_t>(world);
    const std::vector<char> input = inputFor(c, world, id, rank);
    std::vector<char> kernelOut;
    const std::string error = launchCase(c, k, rank, world, links, &counters, stream, input,
                                         &kernelOut);
    if (!error.empty()) {
      failures.push_back(strCat(describeCase(c), ", rank ", rank, ": ", error));
      break;  // the counters are out of step now: the rest would only repeat it
    }
    const std::vector<char> expected = cpuResult(c, k, rank, world, comm, input);
    if (kernelOut != expected) {
      const size_t es = elementSize(c.dtype);
      size_t b = 0;
      while (b < expected.size() && kernelOut[b] == expected[b]) ++b;
      failures.push_back(strCat(describeCase(c), ", rank ", rank, ": element ", b / es,
                                " differs from the CPU executor's"));
    }
  }
  (void)cudaStreamDestroy(stream);
  links.closeCollectively(store, std::chrono::seconds(20));
  return failures;
}

std::vector<std::string> runThreadRankCases(int world, const FifoGeometry& g,
                                            const std::vector<EmulatedCase>& cases,
                                            bool gpuPerRank, std::vector<std::string>* descriptions) {
  MemoryStore store;
  std::vector<std::vector<std::string>> failures(static_cast<size_t>(world));
  std::vector<std::string> described(static_cast<size_t>(world));
  const std::vector<RankOutcome> outcomes = runRanks(world, [&](int rank) {
    failures[rank] = runRankCases(store, rank, world, gpuPerRank ? rank : 0, g, cases,
                                  &described[rank]);
  });
  std::vector<std::string> problems;
  for (int r = 0; r < world; ++r) {
    if (!outcomes[r].ok()) problems.push_back(strCat("rank ", r, ": ", outcomes[r].message()));
    for (const std::string& f : failures[r]) problems.push_back(strCat("rank ", r, ": ", f));
  }
  if (descriptions != nullptr) *descriptions = described;
  return problems;
}

// ---- rank processes -----------------------------------------------------------------------------

std::vector<ProcessOutcome> runRankProcesses(
    int world, SharedMemoryStore& store, const std::function<std::string(int rank)>& body,
    std::chrono::seconds limit, const std::function<void(const std::vector<pid_t>&)>& parent) {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int r = 0; r < world; ++r) {
    char path[] = "/tmp/emulated-rank-XXXXXX";
    const int logFd = mkstemp(path);
    logs.push_back(path);
    const pid_t pid = fork();
    if (pid == 0) {
      // The rank: its stderr into the log, its result into the store, never back into gtest.
      if (logFd >= 0) dup2(logFd, 2);
      std::string result;
      try {
        result = body(r);
      } catch (const std::exception& e) {
        result = strCat("threw: ", e.what());
      }
      try {
        store.set(strCat("test/result/", r), result.substr(0, 1500));
      } catch (...) {
        _exit(3);
      }
      std::fflush(stderr);
      _exit(0);
    }
    if (logFd >= 0) close(logFd);
    pids.push_back(pid);
  }
  if (parent) parent(pids);
  std::vector<ProcessOutcome> outcomes(static_cast<size_t>(world));
  const auto deadline = Clock::now() + limit;
  for (int r = 0; r < world; ++r) {
    int status = 0;
    for (;;) {
      const pid_t done = waitpid(pids[r], &status, WNOHANG);
      if (done == pids[r]) break;
      if (Clock::now() > deadline) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
        outcomes[r].result = "still running at the test's limit: killed";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ProcessOutcome& o = outcomes[r];
    o.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string key = strCat("test/result/", r);
    if (o.result.empty()) {
      o.result = store.check(key) ? store.get(key, std::chrono::milliseconds(10))
                                  : "no result (the rank ended early)";
    }
    if (FILE* f = std::fopen(logs[r].c_str(), "r")) {
      char buffer[4096];
      size_t n;
      while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) o.log.append(buffer, n);
      std::fclose(f);
    }
    std::remove(logs[r].c_str());
  }
  return outcomes;
}

std::string describeOutcomes(const std::vector<ProcessOutcome>& outcomes) {
  std::string out;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    out += strCat("\n  rank ", r, ": exit ", outcomes[r].exitCode, ", result '",
                  outcomes[r].result, "'",
                  outcomes[r].log.empty() ? "" : strCat(", stderr:\n", outcomes[r].log));
  }
  return out;
}

}  // namespace testing_support
}  // namespace ring
