#include "backend/coalescing.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <condition_variable>
#include <mutex>

#include "common/errors.h"

namespace ring {
namespace {

// A held call's Work: completed when the block's task ends; its wait() returns at once while the
// block is still open (see Coalescer::hold).
class HeldWork : public RingWork {
 public:
  HeldWork(int rank, c10d::OpType type, Tensors outputs, std::shared_ptr<std::atomic<bool>> open)
      : RingWork(rank, type, 0, std::move(outputs)), open_(std::move(open)) {}
  bool wait(std::chrono::milliseconds timeout) override {
    if (open_->load()) return true;
    return RingWork::wait(timeout);
  }

 private:
  std::shared_ptr<std::atomic<bool>> open_;
};

class AllOfWork : public c10d::Work {
 public:
  AllOfWork(int rank, c10d::OpType type, std::vector<c10::intrusive_ptr<c10d::Work>> parts)
      : c10d::Work(rank, type),
        parts_(std::move(parts)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            tensorListType())) {
    // The Future completes after the last part's does (or with the first error). The callbacks
    // hold the outputs, not the parts: a part's own future holds them, so a part there would
    // keep itself alive.
    auto remaining = std::make_shared<std::atomic<size_t>>(parts_.size());
    auto failed = std::make_shared<std::atomic<bool>>(false);
    Tensors outputs;
    for (auto& p : parts_) {
      for (const at::Tensor& t : p->result()) outputs.push_back(t);
    }
    if (parts_.empty()) {
      future_->markCompleted(c10::IValue(outputs));
      return;
    }
    for (auto& part : parts_) {
      c10::intrusive_ptr<c10::ivalue::Future> future = future_;
      part->getFuture()->addCallback([future, remaining, failed, outputs](c10::ivalue::Future& f) {
        if (f.hasError()) {
          if (!failed->exchange(true)) future->setError(f.exception_ptr());
          return;
        }
        if (--*remaining == 0 && !failed->load()) future->markCompleted(c10::IValue(outputs));
      });
    }
  }

  bool isCompleted() override {
    for (auto& p : parts_) {
      if (!p->isCompleted()) return false;
    }
    return true;
  }
  bool isSuccess() const override {
    for (const auto& p : parts_) {
      if (!p->isSuccess()) return false;
    }
    return true;
  }
  std::exception_ptr exception() const override {
    for (const auto& p : parts_) {
      if (auto e = p->exception()) return e;
    }
    return nullptr;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& p : parts_) p->wait(timeout);
    return true;
  }
  std::vector<at::Tensor> result() override {
    Tensors all;
    for (auto& p : parts_) {
      for (const at::Tensor& t : p->result()) all.push_back(t);
    }
    return all;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // The block's c10d::WorkResult: the first part's that is not SUCCESS, else SUCCESS once every
  // part has succeeded. Chained on the parts' own results when first asked for.
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override {
    std::call_once(resultChained_, [this] {
      constexpr auto kSuccess = static_cast<int64_t>(c10d::WorkResult::SUCCESS);
      if (parts_.empty()) result_->settleResult(kSuccess);
      // Held by the callbacks, not `this`: a part may complete after this Work is gone.
      auto result = result_;
      auto remaining = std::make_shared<std::atomic<size_t>>(parts_.size());
      for (auto& part : parts_) {
        part->getFutureResult()->addCallback([result, remaining](c10::ivalue::Future& f) {
          const int64_t r = f.hasError() ? static_cast<int64_t>(c10d::WorkResult::UNKNOWN)
                                         : f.value().toInt();
          if (r != kSuccess) {
            result->settleResult(r);
          } else if (--*remaining == 0) {
            result->settleResult(kSuccess);
          }
        });
      }
    });
    return result_->get();
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> parts_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::once_flag resultChained_;
  std::shared_ptr<WorkResultFuture> result_ = std::make_shared<WorkResultFuture>();
};

}  // namespace

void Coalescer::begin(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!open_, "ring: startCoalescing on rank ", rank,
              ": a coalescing block is already open on this group (end it first)");
  open_ = true;
  openFlag_ = std::make_shared<std::atomic<bool>>(true);
  block_ = Block{};
}

c10::intrusive_ptr<c10d::Work> Coalescer::hold(int rank, const char* name, HostCall call) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto work = c10::make_intrusive<HeldWork>(rank, call.type, call.outputs, openFlag_);
  block_.held.push_back(Held{name, std::move(call), work});
  return work;
}

void Coalescer::include(const c10::intrusive_ptr<c10d::Work>& work) {
  std::lock_guard<std::mutex> lock(mutex_);
  block_.started.push_back(work);
}

Coalescer::Block Coalescer::end(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(open_, "ring: endCoalescing on rank ", rank, " without startCoalescing");
  open_ = false;
  openFlag_->store(false);
  Block out = std::move(block_);
  block_ = Block{};
  return out;
}

c10::intrusive_ptr<c10d::Work> allOf(int rank, c10d::OpType type,
                                     std::vector<c10::intrusive_ptr<c10d::Work>> parts) {
  return c10::make_intrusive<AllOfWork>(rank, type, std::move(parts));
}

HostCall fuseHeld(const std::vector<Coalescer::Held>& held,
                  const std::function<void(const CallInfo&, const Tensors&, const AllReduceKey&)>&
                      allReduceConcatenation,
                  const std::function<void(const CallInfo&, const HostCall&)>& runOne) {
  HostCall fused;
  fused.type = c10d::OpType::COALESCED;
  fused.timeout = held.front().call.timeout;
  bool sameAllReduce = held.front().call.allReduce.has_value();
  for (const auto& h : held) {
    sameAllReduce = sameAllReduce && h.call.allReduce && *h.call.allReduce == *held.front().call.allReduce;
    fused.inputs.insert(fused.inputs.end(), h.call.inputs.begin(), h.call.inputs.end());
    fused.outputs.insert(fused.outputs.end(), h.call.outputs.begin(), h.call.outputs.end());
  }
  if (sameAllReduce) {
    // One ring pass over the concatenation of every output (each all_reduce is in place).
    const AllReduceKey key = *held.front().call.allReduce;
    fused.allReduce = key;
    fused.detail = strCat(held.size(), " all_reduces fused: ", fused.outputs.size(), " tensors of ",
                          dtypeName(key.dtype), ", op ", redOpName(key.op));
    fused.body = [allReduceConcatenation, key](const CallInfo& c, const Tensors&,
                                               const Tensors& out) {
      allReduceConcatenation(c, out, key);
    };
    return fused;
  }
  // Each call in turn, on the tensors it was given; each takes its own sequence number's place
  // as one step of this task (every rank holds the same calls in the same order).
  std::vector<HostCall> calls;
  for (const auto& h : held) calls.push_back(h.call);
  fused.detail = strCat(held.size(), " calls back to back");
  fused.body = [calls, runOne](const CallInfo& c, const Tensors&, const Tensors&) {
    for (const HostCall& call : calls) runOne(c, call);
  };
  return fused;
}

}  // namespace ring
