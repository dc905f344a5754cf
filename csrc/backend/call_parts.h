// What the collectives of ring_backend.cc and ring_backend_lists.cc share: a call's detail for
// its flight-recorder entry, and one flat tensor made of a list of them and back. Inline: the
// detail is built on every call, and a file of its own would be one more on every call's walk.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "backend/host_call.h"
#include "common/types.h"
#include "executor/flight_recorder.h"

namespace ring {

// "1000 x float32[, op SUM][, root 3]": this project's dtype names, as in every other message;
// written out only into the flight recorder's entry (CallDetail).
inline CallDetail countDetail(int64_t count, DType d, RedOp op, int64_t root = -1) {
  return CallDetail::counted(count, dtypeName(d), redOpName(op), root);
}
inline CallDetail countDetail(int64_t count, DType d, int64_t root = -1) {
  return CallDetail::counted(count, dtypeName(d), nullptr, root);
}
// The same, then `words` ("1000 x float32 in, 2000 out").
inline CallDetail countDetailThen(int64_t count, DType d, std::string words) {
  CallDetail detail = countDetail(count, d);
  detail.text = std::move(words);
  return detail;
}

// The concatenation of `parts` as one flat tensor (a copy).
inline at::Tensor flatCat(const Tensors& parts) {
  Tensors flat;
  flat.reserve(parts.size());
  for (const auto& t : parts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive pieces of `flat` into each tensor of `outs`, in order.
inline void splitInto(const at::Tensor& flat, const Tensors& outs, size_t first = 0,
                      size_t count = SIZE_MAX) {
  int64_t offset = 0;
  for (size_t i = first; i < outs.size() && i - first < count; ++i) {
    outs[i].view({-1}).copy_(flat.narrow(0, offset, outs[i].numel()));
    offset += outs[i].numel();
  }
}

}  // namespace ring
