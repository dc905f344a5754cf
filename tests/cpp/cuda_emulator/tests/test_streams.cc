// Streams, from the CUDA Runtime API documentation: work in one stream runs in the order it
// was issued; calls return before the work runs; streams run independently of each other;
// the legacy default stream waits for every blocking stream and they wait for it ("Stream
// synchronization behavior"), non-blocking streams do not; destroying a stream with work
// still queued returns at once and the work completes; capture refusals.
#include <vector>

#include "test_support.h"

namespace emutest {
namespace {

using namespace std::chrono_literals;

class EmulatorStreams : public Emulator {};

TEST_F(EmulatorStreams, WorkInOneStreamRunsInIssueOrder) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  std::vector<int> log(200, -1);
  std::atomic<int> count{0};
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(launchOne(&appendValue, s, log.data(), &count, i), cudaSuccess);
  }
  // The launches returned before any of them ran.
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(count.load(), 0);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  ASSERT_EQ(count.load(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(log[i], i);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorStreams, CopiesAndSetsKeepTheirPlaceInTheStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  std::vector<unsigned char> in(64, 7), out(64, 0);
  ASSERT_EQ(cudaMemsetAsync(d, 1, 64, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, in.data(), 32, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), d, 64, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], i < 32 ? 7 : 1) << i;
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Two streams are independent: a kernel in one waits for a kernel in the other, which can only
// work if each stream runs on its own.
TEST_F(EmulatorStreams, TwoStreamsRunConcurrently) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  std::atomic<int> flag{0};
  ASSERT_EQ(launchOne(&waitAt, a, &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&setFlag, b, &flag, 5), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(flag.load(), 5);
  EXPECT_EQ(cudaStreamQuery(a), cudaErrorNotReady);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
}

// k1 in blocking stream s, k2 in the legacy stream, k3 in s: k2 waits for k1, k3 for k2.
TEST_F(EmulatorStreams, TheLegacyStreamOrdersWithBlockingStreams) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Gate gate;
  std::vector<int> log(8, -1);
  std::atomic<int> count{0};
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&appendValue, s, log.data(), &count, 1), cudaSuccess);
  ASSERT_EQ(launchOne(&appendValue, static_cast<cudaStream_t>(nullptr), log.data(), &count, 2),
            cudaSuccess);
  ASSERT_EQ(launchOne(&appendValue, s, log.data(), &count, 3), cudaSuccess);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(count.load(), 0) << "the legacy stream's kernel ran before the blocking stream's";
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(count.load(), 3);
  EXPECT_EQ(log[0], 1);
  EXPECT_EQ(log[1], 2);
  EXPECT_EQ(log[2], 3);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorStreams, NonBlockingStreamsIgnoreTheLegacyStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  std::atomic<int> flag{0};
  ASSERT_EQ(launchOne(&waitAt, static_cast<cudaStream_t>(nullptr), &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&setFlag, s, &flag, 1), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(flag.load(), 1);
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Synchronizing the legacy stream waits for the blocking streams' earlier work too.
TEST_F(EmulatorStreams, SynchronizingTheLegacyStreamWaitsForBlockingStreams) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Gate gate;
  std::atomic<int> flag{0};
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&setFlag, s, &flag, 1), cudaSuccess);
  std::thread opener([&] {
    std::this_thread::sleep_for(30ms);
    gate.release();
  });
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(flag.load(), 1);
  opener.join();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorStreams, DestroyingAStreamWithQueuedWorkReturnsAndTheWorkCompletes) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  std::atomic<int> flag{0};
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  ASSERT_EQ(launchOne(&setFlag, s, &flag, 9), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  gate.release();
  EXPECT_TRUE(eventually([&] { return flag.load() == 9; }));
}

TEST_F(EmulatorStreams, MisuseReturnsTheDocumentedCodes) {
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, 0x10), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamCreateWithFlags(nullptr, 0), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  // A destroyed stream is no longer a stream.
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemsetAsync(nullptr, 0, 0, s), cudaSuccess);  // nothing to do: no check
  std::atomic<int> flag{0};
  EXPECT_EQ(launchOne(&setFlag, s, &flag, 1), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

TEST_F(EmulatorStreams, CaptureIsReportedAndRefusesSynchronization) {
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(nullptr, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);

  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaErrorIllegalState);
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  // Captured work is recorded, not run.
  std::atomic<int> flag{0};
  ASSERT_EQ(launchOne(&setFlag, s, &flag, 1), cudaSuccess);
  cudaGraph_t graph = nullptr;
  // Ending from another thread is refused in thread-local mode.
  cudaError_t other = cudaSuccess;
  std::thread([&] { other = cudaStreamEndCapture(s, &graph); }).join();
  EXPECT_EQ(other, cudaErrorStreamCaptureWrongThread);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(flag.load(), 0);

  // Waiting on a capturing stream is refused and invalidates the capture.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace emutest
