// Stream capture beyond the basics of test_streams.cc, each rule from the CUDA Runtime API
// (cudaStreamBeginCapture, cudaThreadExchangeStreamCaptureMode, cudaStreamGetCaptureInfo,
// cudaGraphInstantiate, cudaGraphLaunch) and the CUDA Programming Guide ("Prohibited and
// unhandled operations"; "Cross-stream dependencies"):
//   - a thread in Global mode may not make a potentially unsafe call (cudaMalloc is the
//     documentation's example; cudaEventQuery the one a watchdog thread makes) while another
//     thread captures in Global mode: the call fails with cudaErrorStreamCaptureUnsupported and
//     the capture is invalidated;
//   - ThreadLocal mode ignores other threads' captures; Relaxed mode is never prohibited; a
//     capture begun in Relaxed mode forbids nothing to other threads;
//   - the calling thread's own capture forbids it unsafe calls unless it swapped to Relaxed;
//   - the legacy stream may not be used while a blocking stream of its device captures;
//   - a record made during a capture goes into it: the event may not be queried or synchronized
//     while the capture lasts (cudaErrorCapturedEvent), and a stream that waits on it joins the
//     capture, its work recorded instead of run until the origin stream ends the capture;
//   - a captured graph runs again each time an instance of it is launched.
#include <vector>

#include "test_support.h"

namespace emutest {
namespace {

class EmulatorCapture : public Emulator {};

struct Captured {
  cudaStream_t stream = nullptr;
  void Begin(cudaStreamCaptureMode mode) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(stream, mode), cudaSuccess);
  }
  cudaError_t End() {
    cudaGraph_t graph = nullptr;
    const cudaError_t e = cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaStreamDestroy(stream);
    (void)cudaGetLastError();
    return e;
  }
};

// An event recorded before any capture, queried from another thread (as a watchdog polls).
cudaError_t queryFromAnotherThread(cudaEvent_t event, const cudaStreamCaptureMode* mode) {
  cudaError_t result = cudaSuccess;
  std::thread([&] {
    if (mode != nullptr) {
      cudaStreamCaptureMode m = *mode;
      ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
      EXPECT_EQ(m, cudaStreamCaptureModeGlobal);  // every thread starts in Global mode
    }
    result = cudaEventQuery(event);
  }).join();
  return result;
}

cudaEvent_t recordedEvent() {
  cudaEvent_t e = nullptr;
  EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e, nullptr), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  return e;
}

TEST_F(EmulatorCapture, AGlobalCaptureForbidsAnotherGlobalThreadsQueryAndIsInvalidated) {
  cudaEvent_t event = recordedEvent();
  Captured c;
  c.Begin(cudaStreamCaptureModeGlobal);
  EXPECT_EQ(queryFromAnotherThread(event, nullptr), cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(c.stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(c.End(), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST_F(EmulatorCapture, AThreadLocalOrRelaxedThreadMayQueryDuringAnotherThreadsCapture) {
  cudaEvent_t event = recordedEvent();
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeThreadLocal,
                                     cudaStreamCaptureModeRelaxed}) {
    Captured c;
    c.Begin(cudaStreamCaptureModeGlobal);
    EXPECT_EQ(queryFromAnotherThread(event, &mode), cudaSuccess) << mode;
    EXPECT_EQ(c.End(), cudaSuccess) << mode;
  }
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST_F(EmulatorCapture, ACaptureBegunInThreadLocalOrRelaxedModeForbidsOtherThreadsNothing) {
  cudaEvent_t event = recordedEvent();
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeThreadLocal,
                                     cudaStreamCaptureModeRelaxed}) {
    Captured c;
    c.Begin(mode);
    EXPECT_EQ(queryFromAnotherThread(event, nullptr), cudaSuccess) << mode;
    EXPECT_EQ(c.End(), cudaSuccess) << mode;
  }
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST_F(EmulatorCapture, TheCapturingThreadsOwnUnsafeCallIsRefusedUnlessItIsRelaxed) {
  Captured c;
  c.Begin(cudaStreamCaptureModeThreadLocal);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(c.End(), cudaErrorStreamCaptureInvalidated);

  c.Begin(cudaStreamCaptureModeGlobal);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);  // as torch's allocator does while capturing
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(c.End(), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(EmulatorCapture, SafeCallsOfAnotherThreadLeaveTheCaptureValid) {
  Captured c;
  c.Begin(cudaStreamCaptureModeGlobal);
  std::thread([] {
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    int device = -1;
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  }).join();
  EXPECT_EQ(c.End(), cudaSuccess);
}

TEST_F(EmulatorCapture, TheLegacyStreamMayNotBeUsedWhileABlockingStreamCaptures) {
  cudaStream_t blocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed), cudaSuccess);
  std::atomic<int> flag{0};
  EXPECT_EQ(launchOne(&setFlag, nullptr, &flag, 1), cudaErrorStreamCaptureImplicit);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(blocking, &graph), cudaErrorStreamCaptureInvalidated);
  // A non-blocking stream's capture does not involve the legacy stream.
  Captured c;
  c.Begin(cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(launchOne(&setFlag, nullptr, &flag, 2), cudaSuccess);
  EXPECT_EQ(c.End(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(flag.load(), 2);
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorCapture, CaptureInfoGivesEachCaptureItsOwnId) {
  Captured a, b;
  a.Begin(cudaStreamCaptureModeRelaxed);
  b.Begin(cudaStreamCaptureModeRelaxed);
  cudaStreamCaptureStatus status;
  unsigned long long idA = 0, idB = 0;
  ASSERT_EQ(cudaStreamGetCaptureInfo(a.stream, &status, &idA), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaStreamGetCaptureInfo(b.stream, &status, &idB), cudaSuccess);
  EXPECT_NE(idA, idB);
  EXPECT_EQ(a.End(), cudaSuccess);
  EXPECT_EQ(b.End(), cudaSuccess);
  cudaStream_t idle;
  ASSERT_EQ(cudaStreamCreate(&idle), cudaSuccess);
  ASSERT_EQ(cudaStreamGetCaptureInfo(idle, &status, &idA), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaStreamDestroy(idle), cudaSuccess);
}

TEST_F(EmulatorCapture, AStreamThatWaitsOnACapturedRecordJoinsTheCapture) {
  Captured origin;
  origin.Begin(cudaStreamCaptureModeGlobal);
  cudaEvent_t forked = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(forked, origin.stream), cudaSuccess);
  // Even a Relaxed thread may not query or synchronize an event recorded in a capture.
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&relaxed), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(forked), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaEventSynchronize(forked), cudaErrorCapturedEvent);
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&relaxed), cudaSuccess);
  cudaStream_t side;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, forked, 0), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  unsigned long long idOrigin = 0, idSide = 1;
  ASSERT_EQ(cudaStreamGetCaptureInfo(origin.stream, &status, &idOrigin), cudaSuccess);
  ASSERT_EQ(cudaStreamGetCaptureInfo(side, &status, &idSide), cudaSuccess);
  EXPECT_EQ(idOrigin, idSide);
  std::atomic<int> flag{0};
  ASSERT_EQ(launchOne(&setFlag, side, &flag, 1), cudaSuccess);  // recorded, not run
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(side, &graph), cudaErrorStreamCaptureUnmatched);
  ASSERT_EQ(cudaStreamEndCapture(origin.stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);  // ended with its origin
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 2u);  // the origin's record and the side stream's kernel
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(flag.load(), 0);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, side), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(flag.load(), 1);
  EXPECT_EQ(cudaEventQuery(forked), cudaSuccess);  // its capture is over
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(forked), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(side), cudaSuccess);
  (void)cudaStreamDestroy(origin.stream);
  (void)cudaGetLastError();
}

TEST_F(EmulatorCapture, AnInstantiatedGraphRunsItsWorkAtEachLaunch) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 16), cudaSuccess);
  std::vector<int> in{1, 2, 3, 4}, out(4, 0);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, in.data(), 16, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), d, 16, cudaMemcpyDeviceToHost, s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out, std::vector<int>(4, 0));  // captured, not run
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 2u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out, in);
  in = {5, 6, 7, 8};  // a replay reads the host memory again
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace emutest
