// The CUDA kernels' walk (schedule/ring_walk.h) against the CPU plans (schedule/ring_plan.h):
// with one channel the walk must be the plan itself, step for step; with several channels each
// channel must walk the plan of its own sub-range. Then every channel's walk runs in the plan
// simulator with FIFOs of two slots (the smallest the kernels accept) and must produce the
// closed-form results. No GPU involved: the walk is RING_HOST_DEVICE code compiled for the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "schedule/ring_walk.h"
#include "plan_simulator.h"
#include "schedule/ring_plan.h"

namespace ring {
namespace {

const Collective kKinds[] = {Collective::AllReduce, Collective::ReduceScatter,
                             Collective::AllGather, Collective::Broadcast};

std::vector<Step> planFor(Collective kind, int n, int rank, int64_t count, int64_t slice,
                          int root) {
  switch (kind) {
    case Collective::AllReduce: return planAllReduce(n, rank, count, slice);
    case Collective::ReduceScatter: return planReduceScatter(n, rank, count, slice);
    case Collective::AllGather: return planAllGather(n, rank, count, slice);
    default: return planBroadcast(n, rank, root, count, slice);
  }
}

WalkShape shapeOf(Collective kind, int n, int rank, int root, int64_t count, int channels,
                  int channel, int64_t slice) {
  WalkShape w;
  w.kind = kind;
  w.nranks = n;
  w.rank = rank;
  w.root = root;
  w.count = count;
  w.channels = channels;
  w.channel = channel;
  w.sliceElems = slice;
  return w;
}

std::vector<Step> walkOf(const WalkShape& w) {
  std::vector<Step> out;
  const int64_t length = walkLength(w);
  for (int64_t k = 0; k < length; ++k) out.push_back(walkStep(w, k));
  return out;
}

std::vector<int> rootsOf(Collective kind, int n) {
  if (kind != Collective::Broadcast) return {-1};
  std::set<int> roots = {0, n / 2, n - 1};
  return std::vector<int>(roots.begin(), roots.end());
}

// One channel: the walk is the CPU plan, offsets of empty steps included.
TEST(CudaWalk, OneChannelIsTheCpuPlan) {
  for (int n : {1, 2, 3, 4, 7, 8}) {
    std::set<int64_t> counts = {0, 1, static_cast<int64_t>(n) - 1, n + 1, 1009, 5000};
    for (int64_t count : counts) {
      for (int64_t slice : {1, 7, 64, 1 << 20}) {
        for (Collective kind : kKinds) {
          for (int root : rootsOf(kind, n)) {
            for (int r = 0; r < n; ++r) {
              SCOPED_TRACE(testing::Message() << collectiveName(kind) << " n=" << n << " rank=" << r
                                              << " count=" << count << " slice=" << slice
                                              << " root=" << root);
              const std::vector<Step> plan = planFor(kind, n, r, count, slice, root);
              const WalkShape w = shapeOf(kind, n, r, root, count, 1, 0, slice);
              const std::vector<Step> walk = walkOf(w);
              ASSERT_EQ(walk.size(), plan.size());
              for (size_t k = 0; k < plan.size(); ++k) {
                ASSERT_EQ(walk[k].prim, plan[k].prim) << "step " << k;
                ASSERT_EQ(walk[k].src, plan[k].src) << "step " << k;
                ASSERT_EQ(walk[k].dst, plan[k].dst) << "step " << k;
                ASSERT_EQ(walk[k].count, plan[k].count) << "step " << k;
              }
            }
          }
        }
      }
    }
  }
}

// Maps a step of the CPU plan over a channel's sub-range (cc elements per block, in the plan's
// own coordinates) to the coordinates of the whole buffer. Only non-empty steps have offsets
// that mean something; the caller skips the others.
Step shiftToChannel(Collective kind, const Step& s, int rank, int64_t count, Range chan) {
  const int64_t cc = chan.count;
  Step out = s;
  switch (kind) {
    case Collective::Broadcast:
      out.src = s.src + chan.offset;
      out.dst = s.dst + chan.offset;
      return out;
    case Collective::ReduceScatter: {
      const int64_t block = s.src / cc;
      out.src = block * count + chan.offset + (s.src - block * cc);
      out.dst = s.prim == Prim::RecvReduceCopy || s.prim == Prim::Copy ? s.dst + chan.offset : out.src;
      return out;
    }
    default: {  // AllGather
      const int64_t block = s.dst / cc;
      out.dst = block * count + chan.offset + (s.dst - block * cc);
      out.src = block == rank ? s.src + chan.offset : out.dst;
      return out;
    }
  }
}

// Reduce-scatter, all-gather and broadcast: channel c walks the CPU plan of its sub-range of
// each block (of the buffer), shifted to its offset. (All-reduce cuts differently: below.)
TEST(CudaWalk, EachChannelWalksThePlanOfItsRange) {
  for (int n : {2, 3, 4, 7, 8}) {
    for (int channels : {2, 3, 8, 32}) {
      std::set<int64_t> counts = {0, 1, 5, static_cast<int64_t>(n) * channels - 1, 1009, 5000,
                                  65536 + 3};
      for (int64_t count : counts) {
        for (int64_t slice : {1, 7, 64, 4096}) {
          if (slice == 1 && count > 1009) continue;  // long enough already; keeps the test fast
          for (Collective kind : kKinds) {
            if (kind == Collective::AllReduce) continue;
            for (int root : rootsOf(kind, n)) {
              for (int r = 0; r < n; ++r) {
                for (int c = 0; c < channels; ++c) {
                  SCOPED_TRACE(testing::Message()
                               << collectiveName(kind) << " n=" << n << " rank=" << r
                               << " count=" << count << " channels=" << channels << " channel=" << c
                               << " slice=" << slice << " root=" << root);
                  const Range chan = chunkRange(count, channels, c);
                  const std::vector<Step> plan = planFor(kind, n, r, chan.count, slice, root);
                  const WalkShape w = shapeOf(kind, n, r, root, count, channels, c, slice);
                  const std::vector<Step> walk = walkOf(w);
                  ASSERT_EQ(walk.size(), plan.size());
                  for (size_t k = 0; k < plan.size(); ++k) {
                    ASSERT_EQ(walk[k].prim, plan[k].prim) << "step " << k;
                    ASSERT_EQ(walk[k].count, plan[k].count) << "step " << k;
                    if (plan[k].count == 0) continue;
                    const Step want = shiftToChannel(kind, plan[k], r, count, chan);
                    ASSERT_EQ(walk[k].src, want.src) << "step " << k;
                    ASSERT_EQ(walk[k].dst, want.dst) << "step " << k;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// Where a step's data sits in the collective's coordinates: the input for reduce-scatter, else
// the output (as walkDataPosition, written here for the CPU plan's steps).
int64_t positionOf(Collective kind, const Step& s) {
  return kind == Collective::ReduceScatter ? s.src : s.dst;
}

// position -> the primitives that touch it on one rank, in order.
using ElementPaths = std::map<int64_t, std::vector<Prim>>;

void addPath(ElementPaths* paths, int64_t position, int64_t count, Prim prim) {
  for (int64_t j = 0; j < count; ++j) (*paths)[position + j].push_back(prim);
}

// Whatever the channel count, every element goes through the same primitives on every rank as
// in the CPU plan: the same rank starts its reduction, the same ranks add to it in the same
// order, the same rank finishes it. That is what makes the kernels' results the CPU executor's
// bits (test_host_kernels.cc checks the bits themselves).
TEST(CudaWalk, EveryElementTakesTheCpuPlansPathWhateverTheChannels) {
  for (int n : {2, 3, 5, 8}) {
    for (int channels : {1, 2, 3, 7, 32}) {
      for (int64_t count : {0, 1, 5, n * channels - 1, 1009, 3001}) {
        for (int64_t slice : {3, 64, 4096}) {
          for (Collective kind : kKinds) {
            for (int root : rootsOf(kind, n)) {
              for (int r = 0; r < n; ++r) {
                SCOPED_TRACE(testing::Message() << collectiveName(kind) << " n=" << n << " rank="
                                                << r << " count=" << count << " channels="
                                                << channels << " slice=" << slice);
                ElementPaths cpu, walk;
                for (const Step& s : planFor(kind, n, r, count, slice, root)) {
                  addPath(&cpu, positionOf(kind, s), s.count, s.prim);
                }
                for (int c = 0; c < channels; ++c) {
                  const WalkShape w = shapeOf(kind, n, r, root, count, channels, c, slice);
                  for (const Step& s : walkOf(w)) {
                    addPath(&walk, walkDataPosition(w, s), s.count, s.prim);
                  }
                }
                ASSERT_EQ(walk.size(), cpu.size());
                for (const auto& [position, prims] : cpu) {
                  ASSERT_EQ(walk[position], prims) << "element " << position;
                }
              }
            }
          }
        }
      }
    }
  }
}

// Rank r's k-th message on a channel is rank r+1's k-th received message, and both compute the
// same data position for it: so they agree on where in the slot it sits (fifoMessageShift).
TEST(CudaWalk, SenderAndReceiverPlaceEveryMessageAlike) {
  for (int n : {2, 3, 4, 7}) {
    for (int channels : {1, 3, 8}) {
      for (int64_t count : {0, 1, 7, 1009, 4099}) {
        for (int64_t slice : {1, 16, 60}) {
          for (Collective kind : kKinds) {
            for (int root : rootsOf(kind, n)) {
              for (int c = 0; c < channels; ++c) {
                std::vector<std::vector<std::pair<int64_t, int64_t>>> sent(n), received(n);
                for (int r = 0; r < n; ++r) {
                  const WalkShape w = shapeOf(kind, n, r, root, count, channels, c, slice);
                  for (const Step& s : walkOf(w)) {
                    const std::pair<int64_t, int64_t> m{walkDataPosition(w, s), s.count};
                    if (primSends(s.prim)) sent[r].push_back(m);
                    if (primReceives(s.prim)) received[r].push_back(m);
                  }
                }
                for (int r = 0; r < n; ++r) {
                  // Empty messages carry no data: their position does not matter.
                  auto nonEmpty = [](std::vector<std::pair<int64_t, int64_t>> v) {
                    v.erase(std::remove_if(v.begin(), v.end(), [](auto m) { return m.second == 0; }),
                            v.end());
                    return v;
                  };
                  ASSERT_EQ(nonEmpty(sent[r]), nonEmpty(received[ringNext(r, n)]))
                      << collectiveName(kind) << " n=" << n << " rank " << r << " count=" << count
                      << " channels=" << channels << " channel " << c << " slice=" << slice;
                }
              }
            }
          }
        }
      }
    }
  }
}

// The counts the launcher adds to its running counters: what the walk really sends and
// receives, and, per channel, rank r's sends are exactly rank r+1's receives (otherwise the
// counters of the next collective would start out of step).
TEST(CudaWalk, MessageCountsMatchTheWalkAndBalanceAroundTheRing) {
  for (int n : {1, 2, 3, 4, 7, 8}) {
    for (int channels : {1, 3, 16}) {
      for (int64_t count : {0, 1, 100, 4099}) {
        for (int64_t slice : {1, 64, 1 << 20}) {
          for (Collective kind : kKinds) {
            for (int root : rootsOf(kind, n)) {
              for (int c = 0; c < channels; ++c) {
                std::vector<int64_t> sends(n), receives(n);
                for (int r = 0; r < n; ++r) {
                  const WalkShape w = shapeOf(kind, n, r, root, count, channels, c, slice);
                  walkMessages(w, &sends[r], &receives[r]);
                  int64_t s = 0, v = 0;
                  for (const Step& st : walkOf(w)) {
                    s += primSends(st.prim) ? 1 : 0;
                    v += primReceives(st.prim) ? 1 : 0;
                  }
                  ASSERT_EQ(sends[r], s) << collectiveName(kind) << " n=" << n << " rank=" << r;
                  ASSERT_EQ(receives[r], v) << collectiveName(kind) << " n=" << n << " rank=" << r;
                }
                for (int r = 0; r < n; ++r) {
                  ASSERT_EQ(sends[r], receives[ringNext(r, n)])
                      << collectiveName(kind) << " n=" << n << " rank=" << r << " count=" << count
                      << " channel=" << c;
                }
              }
            }
          }
        }
      }
    }
  }
}

// ---- every channel of every rank, run in the simulator -------------------------------------------

int64_t value(int r, int64_t i) { return (r + 1) * 1000003 + 7 * i; }
int64_t sumOverRanks(int n, int64_t i) { return 1000003LL * n * (n + 1) / 2 + 7LL * n * i; }
constexpr int64_t kUntouched = -424242;

struct Buffers {
  std::vector<int64_t> input;  // empty for the in-place collectives
  std::vector<int64_t> output;
};

Buffers initial(Collective kind, int n, int r, int64_t count, int root) {
  Buffers b;
  switch (kind) {
    case Collective::AllReduce:
    case Collective::Broadcast:
      for (int64_t i = 0; i < count; ++i) b.output.push_back(value(r, i));
      break;
    case Collective::ReduceScatter:
      for (int64_t i = 0; i < n * count; ++i) b.input.push_back(value(r, i));
      b.output.assign(static_cast<size_t>(count), kUntouched);
      break;
    default:  // AllGather
      for (int64_t i = 0; i < count; ++i) b.input.push_back(value(r, i));
      b.output.assign(static_cast<size_t>(n * count), kUntouched);
      break;
  }
  (void)root;
  return b;
}

int64_t expected(Collective kind, int n, int r, int64_t count, int root, int64_t i) {
  switch (kind) {
    case Collective::AllReduce: return sumOverRanks(n, i);
    case Collective::ReduceScatter: return sumOverRanks(n, r * count + i);
    case Collective::AllGather: return value(static_cast<int>(i / count), i % count);
    default: return value(root, i);
  }
}

TEST(CudaWalk, ChannelsSimulatedWithTwoSlotFifosGiveTheClosedForm) {
  for (int n : {2, 3, 4, 7}) {
    for (int channels : {1, 3, 8}) {
      for (int64_t count : {0, 1, 7, 1009}) {
        for (int64_t slice : {1, 16, 1 << 20}) {
          for (Collective kind : kKinds) {
            for (int root : rootsOf(kind, n)) {
              SCOPED_TRACE(testing::Message() << collectiveName(kind) << " n=" << n << " count="
                                              << count << " channels=" << channels
                                              << " slice=" << slice << " root=" << root);
              std::vector<Buffers> bufs;
              for (int r = 0; r < n; ++r) bufs.push_back(initial(kind, n, r, count, root));
              for (int c = 0; c < channels; ++c) {
                std::vector<sim::RankState> ranks;
                for (int r = 0; r < n; ++r) {
                  sim::RankState st;
                  for (const Step& s : walkOf(shapeOf(kind, n, r, root, count, channels, c, slice))) {
                    st.steps.push_back(Step{s.prim, s.src, s.dst, s.count});
                  }
                  st.input = bufs[r].input;
                  st.output = bufs[r].output;
                  st.inputIsOutput = bufs[r].input.empty();
                  ranks.push_back(std::move(st));
                }
                sim::RingSimulator simulator(std::move(ranks), slice, 2);
                sim::Outcome outcome = sim::Outcome::Deadlocked;
                ASSERT_NO_THROW(outcome = simulator.run()) << "channel " << c;
                ASSERT_EQ(outcome, sim::Outcome::Completed) << "channel " << c;
                ASSERT_EQ(simulator.messagesLeft(), 0u) << "channel " << c;
                for (int r = 0; r < n; ++r) bufs[r].output = simulator.rank(r).output;
              }
              for (int r = 0; r < n; ++r) {
                const std::vector<int64_t>& out = bufs[r].output;
                for (size_t i = 0; i < out.size(); ++i) {
                  ASSERT_EQ(out[i], expected(kind, n, r, count, root, static_cast<int64_t>(i)))
                      << "rank " << r << " element " << i;
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ring
