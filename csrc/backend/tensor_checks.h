// Argument checks shared by every collective: each failure names the collective, the rank,
// the argument and what was expected, and is raised before any communication.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

#include "common/types.h"

namespace ring {

struct CheckScope {
  const char* collective;  // "all_reduce"
  int rank;
  int size;
};

// Throws c10::Error (RuntimeError in Python) with "ring: <collective> on rank <r>: <text>".
[[noreturn]] void failUsage(const CheckScope& s, const std::string& text);

DType toRingDType(const CheckScope& s, at::ScalarType t);
// Maps the op (with PREMUL_SUM's factor) and checks it against the dtype.
RedOp toRingOp(const CheckScope& s, const c10d::ReduceOp& op, at::ScalarType t, double* factor);

// Dense, contiguous, on CPU or CUDA; `what` names the argument ("input", "output[2]").
void checkTensor(const CheckScope& s, const at::Tensor& t, const std::string& what);
// Exactly one tensor per call (one device per rank).
void checkSingle(const CheckScope& s, const std::vector<at::Tensor>& v, const std::string& what);
void checkSameDevice(const CheckScope& s, const at::Tensor& a, const at::Tensor& b);
void checkSameDType(const CheckScope& s, const at::Tensor& a, const at::Tensor& b,
                    const std::string& what);
void checkRoot(const CheckScope& s, int64_t root, const char* argument);
void checkNumel(const CheckScope& s, const at::Tensor& t, int64_t expected,
                const std::string& what, const std::string& why);
// Elements above INT64 byte ranges are refused; sizes are counted in int64 throughout.
void checkListSize(const CheckScope& s, size_t got, size_t expected, const std::string& what);

std::string shapeString(const at::Tensor& t);

// Whether the bytes of two tensors overlap (empty tensors overlap nothing).
bool overlaps(const at::Tensor& a, const at::Tensor& b);
// all_gather_into_tensor: an input inside the output must be exactly this rank's block (FSDP
// passes output.narrow() of it); any other overlap would be overwritten before it is sent.
void checkAllGatherAliasing(const CheckScope& s, const at::Tensor& input, const at::Tensor& output);

}  // namespace ring
