// Events, from the CUDA Runtime API documentation (cudaEventRecord, cudaEventQuery,
// cudaStreamWaitEvent, cudaEventDestroy): a record captures the stream's work at the time of
// the call, later work does not change it; query, synchronize and wait use the most recent
// record before the call; before any record an event stands for no work (complete);
// destroying an event whose record is still pending is allowed.
#include "test_support.h"

namespace emutest {
namespace {

using namespace std::chrono_literals;

class EmulatorEvents : public Emulator {};

TEST_F(EmulatorEvents, ANeverRecordedEventIsComplete) {
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(EmulatorEvents, ARecordCapturesTheStreamAtTheTimeOfTheCall) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate first, second;
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(launchOne(&waitAt, s, &first), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(launchOne(&waitAt, s, &second), cudaSuccess);  // after the record
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not ready is a status, not an error";
  first.release();
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);  // the later work is still waiting
  second.release();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// A wait refers to the record in force when cudaStreamWaitEvent was called; a re-record
// afterwards affects later calls only.
TEST_F(EmulatorEvents, AWaitUsesTheLastRecordBeforeTheCall) {
  cudaStream_t producer, consumer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  Gate first, second;
  std::atomic<int> flag{0};
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(launchOne(&waitAt, producer, &first), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, producer), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(consumer, e, 0), cudaSuccess);
  ASSERT_EQ(launchOne(&setFlag, consumer, &flag, 1), cudaSuccess);
  ASSERT_EQ(launchOne(&waitAt, producer, &second), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, producer), cudaSuccess);  // moves the event, not the wait
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(flag.load(), 0) << "the consumer did not wait for the first record";
  first.release();
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_EQ(flag.load(), 1);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);  // the second record is still pending
  second.release();
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(producer), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(consumer), cudaSuccess);
}

TEST_F(EmulatorEvents, DestroyingAnEventWithAPendingRecordIsAllowed) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
  gate.release();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)cudaGetLastError();
}

TEST_F(EmulatorEvents, MisuseReturnsTheDocumentedCodes) {
  cudaEvent_t e;
  EXPECT_EQ(cudaEventCreateWithFlags(&e, 0x40), cudaErrorInvalidValue);
  // Interprocess events must be created without timing.
  EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventInterprocess), cudaErrorInvalidValue);
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 7), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e, s), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e, nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventSynchronize(e), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(e), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, e, 0), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

// Recorded on the legacy stream, an event covers the blocking streams' earlier work too.
TEST_F(EmulatorEvents, ALegacyRecordCoversBlockingStreams) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Gate gate;
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(launchOne(&waitAt, s, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, nullptr), cudaSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
  gate.release();
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
}  // namespace emutest
