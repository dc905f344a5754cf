// The small collectives of a group whose ranks all share memory, each as one mailbox round
// (transport/link.h, Mailbox): every rank posts its message once into its own mailbox, then
// reads every peer's from theirs.
//
// Why: the same single round as the direct collectives (direct_collectives.h), without the
// FIFOs' per-message counters and credits: a 2-rank 4 KiB all_reduce through the FIFOs is a
// chain of 6-8 dependent cache-line transfers between the cores, through a mailbox the data's
// own lines and one flag line (docs/latency_cpu.md). Results are the direct round's bit for
// bit: every rank combines the n contributions in rank order (combineInPositionOrder).
#pragma once

#include <cstdint>

#include "executor/cpu_executor.h"
#include "transport/link.h"

namespace ring {

// Whether this rank's message of the round is still to be posted (Now), or was posted already
// by the thread that issued the call, ahead of it (Communicator::post); the round then only
// reads the peers' messages.
enum class MailboxPost { Now, AlreadyDone };

// data (count elements, count * io.elemSize <= box.capacity()) = x_0 op ... op x_{n-1}, then
// io.divide (AVG) if set; in place.
// With AlreadyDone, data must still hold what was posted (the caller's contract: an in-place
// all_reduce's tensor is not touched until its Work completes).
void mailboxAllReduce(Mailbox& box, int rank, int size, char* data, int64_t count,
                      const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx,
                      MailboxPost post = MailboxPost::Now);

// output block r (countPerRank elements of elemSize bytes, at most box.capacity() bytes) =
// rank r's input; input may be this rank's block of output.
void mailboxAllGather(Mailbox& box, int rank, int size, const void* input, void* output,
                      int64_t countPerRank, size_t elemSize, const Fingerprint& fp,
                      const WaitContext& ctx, MailboxPost post = MailboxPost::Now);

// Returns once every rank of the group has posted its round of `fp`.
void mailboxBarrier(Mailbox& box, int rank, int size, const Fingerprint& fp,
                    const WaitContext& ctx, MailboxPost post = MailboxPost::Now);

}  // namespace ring
