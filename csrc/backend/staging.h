// CUDA tensors of the calls that have no ring kernel go through pinned host memory and the host
// ring, asynchronously, with ProcessGroupNCCL's stream semantics kept where a host step allows:
// the order and completion are executor/staged_copies.h's (torch-free, tested over the emulated
// CUDA runtime); this adapter picks the host buffers (an input that is a view into an output
// becomes the same view of its host copy), keeps the caller's and the pinned memory alive until
// the copies are done, and gives the call torch's Work and Future.
// Written once for every collective: the host call itself is whatever the backend's CPU path
// does with the host tensors.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda_sync.h"
#include "executor/staged_copies.h"

namespace ring {

class StagedWork;

class StagedCall {
 public:
  // Queues the copies in on `stream` (after the caller's current stream). `collective` is
  // counted (stagedCalls); `what` names the call in errors ("reduce (sequence 4) on rank 1").
  StagedCall(const char* collective, std::string what, c10d::OpType type, uint64_t seq, int rank,
             DedicatedStream& stream, std::vector<at::Tensor> inputs,
             std::vector<at::Tensor> outputs);
  ~StagedCall();

  // The host tensors to run the call on: one per input and output, in order. An input that is
  // (a view into) an output is the same view into that output's host copy, so in-place calls
  // stay in place.
  const std::vector<at::Tensor>& hostInputs() const { return hostInputs_; }
  const std::vector<at::Tensor>& hostOutputs() const { return hostOutputs_; }

  // Blocks until the copies in have landed; throws TimeoutError after `timeout`.
  void waitCopiedIn(std::chrono::milliseconds timeout) const;
  // Blocks until the host part has ended and the copies back are queued, at most `timeout`;
  // whether they are.
  bool waitCopiesBackQueued(std::chrono::milliseconds timeout) const;
  // After the host call: on success copies the outputs back and completes the Work; on error
  // fails it. `source`: a receive from any source's sender (else -1); `hostMs`: the host call's
  // duration (the Work's getDuration; -1 unknown). Any thread; once.
  void finish(std::exception_ptr error, int source = -1, float hostMs = -1.0f);

  c10::intrusive_ptr<c10d::Work> work() const;
  // The completion key the Work answers (torch 2.15's getCompletionKey): the host call's, whose
  // end the completion hooks report. Set before the Work is handed out.
  void useCompletionKey(uint64_t key);
  const std::string& what() const { return what_; }

 private:
  DedicatedStream& stream_;
  const c10::DeviceIndex device_;  // the stream's
  const std::string what_;
  std::shared_ptr<StagedCopies> copies_;
  std::vector<at::Tensor> outputs_;  // the caller's, kept until the copies back are queued
  std::vector<at::Tensor> inputs_;
  std::vector<at::Tensor> hostInputs_, hostOutputs_;
  c10::intrusive_ptr<StagedWork> work_;
};

// How many calls of each collective have been staged in this process: GPU tests check that
// the calls they mean to run as kernels never come here.
std::map<std::string, uint64_t> stagedCalls();

}  // namespace ring
