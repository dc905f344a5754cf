// One collective of a Communicator called the way the backend calls it (Communicator::run of
// the call's CollectiveArgs: prepared, then run), in the argument order of torch.distributed's
// collectives, for tests that make one call at a time.
#pragma once

#include <cstdint>

#include "common/types.h"
#include "executor/communicator.h"
#include "executor/prepared_call.h"

namespace ring {
namespace testing_support {

inline void runAllReduce(Communicator& comm, void* data, int64_t count, DType t, RedOp op,
                         double factor, const CallInfo& c) {
  comm.run(CollectiveArgs::allReduce(count, t, op, factor), data, data, c);
}

inline void runReduceScatter(Communicator& comm, const void* input, void* output,
                             int64_t countPerRank, DType t, RedOp op, double factor,
                             const CallInfo& c) {
  comm.run(CollectiveArgs::reduceScatter(countPerRank, t, op, factor), input, output, c);
}

inline void runAllGather(Communicator& comm, const void* input, void* output,
                         int64_t countPerRank, DType t, const CallInfo& c) {
  comm.run(CollectiveArgs::allGather(countPerRank, t), input, output, c);
}

inline void runBroadcast(Communicator& comm, void* data, int64_t count, DType t, int root,
                         const CallInfo& c) {
  comm.run(CollectiveArgs::broadcast(count, t, root), data, data, c);
}

inline void runReduce(Communicator& comm, const void* input, void* output, int64_t count,
                      DType t, RedOp op, double factor, int root, const CallInfo& c) {
  comm.run(CollectiveArgs::reduce(count, t, op, factor, root), input, output, c);
}

inline void runGather(Communicator& comm, const void* input, void* output, int64_t countPerRank,
                      DType t, int root, const CallInfo& c) {
  comm.run(CollectiveArgs::gather(countPerRank, t, root), input, output, c);
}

inline void runScatter(Communicator& comm, const void* input, void* output,
                       int64_t countPerRank, DType t, int root, const CallInfo& c) {
  comm.run(CollectiveArgs::scatter(countPerRank, t, root), input, output, c);
}

inline void runBarrier(Communicator& comm, const CallInfo& c) {
  comm.run(CollectiveArgs::barrier(), nullptr, nullptr, c);
}

}  // namespace testing_support
}  // namespace ring
