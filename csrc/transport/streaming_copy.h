// A copy into memory that another core reads next (a mailbox message, a ring slot), with
// non-temporal stores: the stores go to memory through the write-combining buffers instead of
// first taking each destination line into this core's cache.
//
// Why: the destination lines were read by the peer when it last took a message from the same place,
// so each of them sits in the peer's cache, and a cached store must fetch it back and invalidate
// the peer's copy, a trip between the cores per 64 bytes, before writing. A non-temporal store
// writes whole lines without that fetch; the peer then reads them from memory, in order, which its
// prefetcher streams: where the cores shared no cache it cut posts and 1 MiB calls by half.
// Where the cores share a cache the cached copy wins from a few hundred KiB (both:
// docs/notes/code_comment_figures.md, "Streaming stores"), so whether a call streams starts from
// the machine's cache layout and is then the group's measured choice (executor/copy_choice.h);
// below about 4 KiB the cached copy was as fast or faster (the write-combining flush has a fixed
// cost), so smaller copies never stream.
//
// Ordering: non-temporal stores are weakly ordered on x86 (a later ordinary store, the
// message's release flag, may become visible before them), so the copy ends with an SFENCE:
// every byte copied is visible before any store the caller makes after it returns. Elsewhere
// (aarch64) the copy is a plain memcpy with no fence of its own: there the caller's publish,
// a release store, is all that orders the bytes before the flag. So on every target a slot or
// a mailbox is published with a release store (or stronger), never a relaxed one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace ring {

// From this many bytes on a copy streams (see the top).
constexpr size_t kStreamingCopyBytes = 4096;

inline void copyForPeer(void* to, const void* from, size_t bytes) {
#if defined(__x86_64__)
  if (bytes >= kStreamingCopyBytes) {
    char* d = static_cast<char*>(to);
    const char* s = static_cast<const char*>(from);
    // Up to the destination's first 16-byte boundary with ordinary stores: movntdq needs it.
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
    std::memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64) {
      // Four 16-byte stores fill one 64-byte line: the write-combining buffer leaves whole.
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    for (; i + 16 <= bytes; i += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    }
    std::memcpy(d + i, s + i, bytes - i);
    // The fence of the top's "Ordering": the caller's flag comes after every byte.
    _mm_sfence();
    return;
  }
#endif
  if (bytes > 0) std::memcpy(to, from, bytes);
}

}  // namespace ring
