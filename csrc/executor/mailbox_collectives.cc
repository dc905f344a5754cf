#include "executor/mailbox_collectives.h"

#include <cstring>
#include <vector>

#include "common/errors.h"
#include "executor/direct_collectives.h"

namespace ring {

void mailboxAllReduce(Mailbox& box, int rank, int size, char* data, int64_t count,
                      const PlanBuffers& io, const Fingerprint& fp, const WaitContext& ctx,
                      MailboxPost post) {
  const int64_t bytes = count * static_cast<int64_t>(io.elemSize);
  RING_ASSERT(bytes <= box.capacity(), "an all_reduce of ", bytes, " bytes in a mailbox of ",
              box.capacity());
  if (post == MailboxPost::Now) box.post(data, bytes, fp);
  // The peers' contributions where they lie, in their mailboxes (readable until this rank's
  // next post). A thread's vectors are kept: an allocation per call is a measurable share of
  // a small all_reduce.
  thread_local std::vector<const void*> part;
  thread_local std::vector<char> own;
  part.resize(static_cast<size_t>(size));
  // The next rank first, as the ring would (usually the one that posted first).
  for (int k = 1; k < size; ++k) {
    const int peer = (rank + k) % size;
    part[static_cast<size_t>(peer)] = box.receive(peer, bytes, fp, ctx);
  }
  combineInPositionOrder(data, part.data(), size, rank, count, io, &own);
}

void mailboxAllGather(Mailbox& box, int rank, int size, const void* input, void* output,
                      int64_t countPerRank, size_t elemSize, const Fingerprint& fp,
                      const WaitContext& ctx, MailboxPost post) {
  const int64_t blockBytes = countPerRank * static_cast<int64_t>(elemSize);
  RING_ASSERT(blockBytes <= box.capacity(), "an all_gather part of ", blockBytes,
              " bytes in a mailbox of ", box.capacity());
  char* out = static_cast<char*>(output);
  char* mine = out + rank * blockBytes;
  // Posted from the input before it is placed: the input may be this rank's block (FSDP).
  if (post == MailboxPost::Now) box.post(input, blockBytes, fp);
  if (mine != input && blockBytes > 0) {
    std::memmove(mine, input, static_cast<size_t>(blockBytes));
  }
  for (int k = 1; k < size; ++k) {
    const int peer = (rank + k) % size;
    const void* got = box.receive(peer, blockBytes, fp, ctx);
    if (blockBytes > 0) {
      std::memcpy(out + peer * blockBytes, got, static_cast<size_t>(blockBytes));
    }
  }
}

void mailboxBarrier(Mailbox& box, int rank, int size, const Fingerprint& fp,
                    const WaitContext& ctx, MailboxPost post) {
  if (post == MailboxPost::Now) box.post(nullptr, 0, fp);
  for (int k = 1; k < size; ++k) box.receive((rank + k) % size, 0, fp, ctx);
}

}  // namespace ring
