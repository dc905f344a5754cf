// Ranks of a CudaRingEngine group over the emulated CUDA runtime, as threads (runEngineGroup)
// or one per process (runEngineRank in each): every rank builds a Communicator (shared memory:
// the engine's health, break and flight recorder hooks go through it, as in the backend), then
// its engine on an emulated device, and a caller stream of its own; the body runs; the engines
// shut down together.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_support.h"
#include "common/errors.h"
#include "executor/communicator.h"
#include "executor/cuda_ring_engine.h"
#include "executor/flight_recorder.h"
#include "memory_store.h"
#include "rank_threads.h"

namespace ring {
namespace testing_support {

struct EngineRank {
  int rank;
  int size;
  Communicator& comm;
  FlightRecorder& recorder;
  CudaRingEngine& engine;
  cudaStream_t caller;  // this rank's "current stream" (non-blocking, as torch's side streams)
};

struct EngineGroupOptions {
  FifoGeometry geometry{2, 4, 1024};
  // The group's timeout: bounds the close protocol at shutdown (a rank that stayed out).
  std::chrono::milliseconds groupTimeout{5000};
  // The emulated device of every rank (each rank thread makes it current first, as a rank
  // calls torch.cuda.set_device).
  int device = 0;
};

inline void cudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(strCat(what, ": ", cudaGetErrorName(e), " ", cudaGetErrorString(e)));
  }
}

// A call of `collective` on this rank's caller stream.
inline CudaCall callOf(const EngineRank& r, uint64_t seq,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20),
                       const char* collective = "all_reduce") {
  CudaCall c;
  c.collective = collective;
  c.seq = seq;
  c.timeout = timeout;
  c.caller = r.caller;
  return c;
}

// One rank of an engine group: the set-up above through `store`, then body(r), then the
// collective shutdown (also after a body that threw, whose exception is then rethrown).
inline void runEngineRank(Store& store, int rank, int n, const std::function<void(EngineRank&)>& body,
                          const EngineGroupOptions& o) {
  cudaOk(cudaSetDevice(o.device), "the rank's device");
  Communicator comm(store, rank, n, smallSlotOptions());
  FlightRecorder recorder;
  CudaEngineOptions eo;
  eo.rank = rank;
  eo.size = n;
  eo.groupName = "engine";
  eo.timeout = o.groupTimeout;
  eo.links.device = o.device;
  eo.links.geometry = o.geometry;
  eo.links.hostId = "emulated-host";
  eo.links.timeout = std::chrono::seconds(20);
  CudaRingEngine engine(store, eo, communicatorHooks(comm, recorder));
  if (!engine.usable()) throw std::runtime_error("links declined: " + engine.declineReason());
  cudaStream_t caller = nullptr;
  cudaOk(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking), "caller stream");
  EngineRank r{rank, n, comm, recorder, engine, caller};
  std::exception_ptr failed;
  try {
    body(r);
  } catch (...) {
    failed = std::current_exception();
  }
  engine.shutdown();  // collective: every rank, also one whose body failed
  (void)cudaStreamDestroy(caller);
  if (failed) std::rethrow_exception(failed);
}

// Threads as ranks, through one in-memory store.
inline std::vector<RankOutcome> runEngineGroup(int n, const std::function<void(EngineRank&)>& body,
                                               const EngineGroupOptions& o = {}) {
  MemoryStore store;
  return runRanks(n, [&](int rank) { runEngineRank(store, rank, n, body, o); });
}

// Polls until the task has finished (its outcome known) or `bound` passes; the time it took.
inline std::chrono::milliseconds awaitFinished(CudaTask& t, std::chrono::milliseconds bound) {
  const auto start = std::chrono::steady_clock::now();
  while (!t.finished() && std::chrono::steady_clock::now() - start < bound) {
    t.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// "" if the task succeeded, else its error's message ("(running)" if it has not finished).
inline std::string errorOf(CudaTask& t) {
  if (!t.finished()) return "(running)";
  std::exception_ptr e = t.error();
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

// What Work.wait() does and then a copy to the host: `stream` waits for the task's end event,
// `bytes` of `device` are copied on it, and the host waits for that copy.
inline std::vector<char> readAfter(CudaTask& t, cudaStream_t stream, const void* device,
                                   size_t bytes) {
  std::vector<char> host(bytes);
  cudaOk(cudaStreamWaitEvent(stream, t.endEvent(), 0), "waiting for the end event");
  cudaOk(cudaMemcpyAsync(host.data(), device, bytes, cudaMemcpyDeviceToHost, stream), "copy back");
  cudaOk(cudaStreamSynchronize(stream), "synchronizing");
  return host;
}

// A device buffer of floats, set from the host.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& values) : count_(values.size()) {
    cudaOk(cudaMalloc(&ptr_, bytes() == 0 ? 16 : bytes()), "cudaMalloc");
    cudaOk(cudaMemcpy(ptr_, values.data(), bytes(), cudaMemcpyHostToDevice), "fill");
  }
  ~DeviceFloats() { (void)cudaFree(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* data() const { return static_cast<float*>(ptr_); }
  size_t bytes() const { return count_ * sizeof(float); }

 private:
  void* ptr_ = nullptr;
  size_t count_;
};

inline std::vector<float> asFloats(const std::vector<char>& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// The buffer's floats once the task's kernel is done, read as Work.wait() orders a stream.
inline std::vector<float> floatsAfterTask(CudaTask& t, cudaStream_t stream,
                                          const DeviceFloats& buffer) {
  return asFloats(readAfter(t, stream, buffer.data(), buffer.bytes()));
}

// A stream held back until the host opens it: a one-thread kernel on that stream that waits
// for the host's word (as a GPU kernel spinning on host-mapped memory would). Whatever the
// test queues on the stream after close() runs only after open().
class StreamGate {
 public:
  // Queues the waiting kernel on `stream`.
  void close(cudaStream_t stream) {
    stream_ = stream;
    std::atomic<int>* word = &open_;
    void* args[] = {&word};
    cudaOk(cudaLaunchKernel(&StreamGate::waitForOpen, dim3(1), dim3(1), args, 0, stream),
           "launching the gate");
  }
  void open() { open_.store(1, std::memory_order_release); }
  // Opens, and waits for the stream to pass the gate: the kernel reads this object's word.
  ~StreamGate() {
    open();
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  }

 private:
  static void waitForOpen(std::atomic<int>* word) {
    while (word->load(std::memory_order_acquire) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::atomic<int> open_{0};
  cudaStream_t stream_ = nullptr;
};

// Every rank arrives, then all go on (a std::barrier of C++17).
class Latch {
 public:
  explicit Latch(int n) : left_(n) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--left_ == 0) cv_.notify_all();
    cv_.wait(lock, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int left_;
};

}  // namespace testing_support
}  // namespace ring
