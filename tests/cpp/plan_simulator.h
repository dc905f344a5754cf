// A single-threaded model of the ring: every rank's plan runs against in-memory FIFOs between
// ring neighbours (rank r sends to r+1), one step at a time, round-robin. Each step is
// interpreted exactly as runRingPlan (csrc/executor/cpu_executor.cc) does, with int64 SUM as
// the reduction, so the tests can check plans without threads, shared memory or timing.
//
// A step runs atomically once its input message is there and its output FIFO has room: the
// executor holds the received slot until the step has published its own message, so from the
// neighbours' point of view the two are indistinguishable.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"
#include "schedule/ring_plan.h"

namespace ring {
namespace sim {

struct Message {
  int sender;
  int64_t index;  // position of the message on its link, as the executor's header step
  std::vector<int64_t> payload;
};

struct RankState {
  std::vector<Step> steps;
  std::vector<int64_t> input;
  std::vector<int64_t> output;
  // In-place collectives read their input from `output`, starting at this element.
  bool inputIsOutput = false;
  int64_t inputOffset = 0;
  size_t pc = 0;
  int64_t sent = 0;
  int64_t received = 0;
};

enum class Outcome { Completed, Deadlocked };

class RingSimulator {
 public:
  // capacity: messages a link holds at once; 0 means unbounded.
  RingSimulator(std::vector<RankState> ranks, int64_t sliceElems, size_t capacity)
      : ranks_(std::move(ranks)), links_(ranks_.size()), slice_(sliceElems), capacity_(capacity) {}

  // Steps every rank in turn, one step each, until all are done or a whole round moves nothing.
  Outcome run() {
    while (true) {
      bool moved = false, done = true;
      for (int r = 0; r < size(); ++r) {
        moved |= step(r);
        done &= ranks_[static_cast<size_t>(r)].pc == ranks_[static_cast<size_t>(r)].steps.size();
      }
      if (done) return Outcome::Completed;
      if (!moved) return Outcome::Deadlocked;
    }
  }

  int size() const { return static_cast<int>(ranks_.size()); }
  const RankState& rank(int r) const { return ranks_[static_cast<size_t>(r)]; }
  size_t maxDepth() const { return maxDepth_; }
  size_t messagesLeft() const {
    size_t left = 0;
    for (const auto& l : links_) left += l.size();
    return left;
  }

 private:
  // Runs rank r's next step if it can; false if r is finished or blocked.
  bool step(int r) {
    RankState& me = ranks_[static_cast<size_t>(r)];
    if (me.pc == me.steps.size()) return false;
    const Step& s = me.steps[me.pc];
    const int n = size();
    const int prev = ringPrev(r, n);
    std::deque<Message>& inbox = links_[static_cast<size_t>(prev)];
    std::deque<Message>& outbox = links_[static_cast<size_t>(r)];
    const bool receives = primReceives(s.prim), sends = primSends(s.prim);
    if ((receives || sends) && n == 1) fail(r, "a step that communicates in a group of one");
    if (receives && inbox.empty()) return false;
    if (sends && capacity_ != 0 && outbox.size() >= capacity_) return false;

    if (s.count < 0 || s.count > slice_) fail(r, strCat("slice of ", s.count, " elements"));
    const bool readsSrc = s.prim != Prim::RecvCopySend && s.prim != Prim::Recv;
    const bool writesDst = s.prim != Prim::Send && s.prim != Prim::RecvReduceSend;
    const int64_t inSize = me.inputIsOutput ? static_cast<int64_t>(me.output.size()) - me.inputOffset
                                            : static_cast<int64_t>(me.input.size());
    if (readsSrc && (s.src < 0 || s.src + s.count > inSize)) fail(r, "src out of bounds");
    if (writesDst && (s.dst < 0 || s.dst + s.count > static_cast<int64_t>(me.output.size()))) {
      fail(r, "dst out of bounds");
    }
    auto in = [&](int64_t i) {
      return me.inputIsOutput ? me.output[static_cast<size_t>(me.inputOffset + s.src + i)]
                              : me.input[static_cast<size_t>(s.src + i)];
    };
    auto out = [&](int64_t i) -> int64_t& { return me.output[static_cast<size_t>(s.dst + i)]; };

    std::vector<int64_t> got;
    if (receives) {
      Message m = std::move(inbox.front());
      inbox.pop_front();
      // The executor's verifyHeader: right sender, next message in order, expected size.
      if (m.sender != prev || m.index != me.received ||
          static_cast<int64_t>(m.payload.size()) != s.count) {
        fail(r, strCat("got message ", m.index, " of ", m.payload.size(), " from rank ",
                       m.sender, ", expected message ", me.received, " of ", s.count,
                       " from rank ", prev));
      }
      got = std::move(m.payload);
      ++me.received;
    }
    std::vector<int64_t> msg;
    const size_t k = static_cast<size_t>(s.count);
    switch (s.prim) {
      case Prim::Send:
        for (size_t i = 0; i < k; ++i) msg.push_back(in(i));
        break;
      case Prim::RecvReduceSend:
        for (size_t i = 0; i < k; ++i) msg.push_back(got[i] + in(i));
        break;
      case Prim::RecvReduceCopySend:
        for (size_t i = 0; i < k; ++i) out(i) = got[i] + in(i);
        for (size_t i = 0; i < k; ++i) msg.push_back(out(i));
        break;
      case Prim::RecvReduceCopy:
        for (size_t i = 0; i < k; ++i) out(i) = got[i] + in(i);
        break;
      case Prim::RecvCopySend:
        for (size_t i = 0; i < k; ++i) out(i) = got[i];
        msg = got;
        break;
      case Prim::Recv:
        for (size_t i = 0; i < k; ++i) out(i) = got[i];
        break;
      case Prim::Copy: {
        std::vector<int64_t> tmp;  // memmove semantics: source read before writing
        for (size_t i = 0; i < k; ++i) tmp.push_back(in(i));
        for (size_t i = 0; i < k; ++i) out(i) = tmp[i];
        break;
      }
    }
    if (sends) {
      outbox.push_back(Message{r, me.sent++, std::move(msg)});
      if (outbox.size() > maxDepth_) maxDepth_ = outbox.size();
    }
    ++me.pc;
    return true;
  }

  [[noreturn]] void fail(int r, const std::string& what) const {
    const RankState& me = ranks_[static_cast<size_t>(r)];
    throw std::logic_error(strCat("rank ", r, " step ", me.pc, " (",
                                  primName(me.steps[me.pc].prim), "): ", what));
  }

  std::vector<RankState> ranks_;
  std::vector<std::deque<Message>> links_;  // [r] carries rank r -> rank r+1
  int64_t slice_;
  size_t capacity_;
  size_t maxDepth_ = 0;
};

}  // namespace sim
}  // namespace ring
