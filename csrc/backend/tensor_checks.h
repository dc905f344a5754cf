// Argument checks shared by every collective: each failure names the collective, the rank,
// the argument and what was expected, and is raised before any communication.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <string_view>
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
// Maps the op (with PREMUL_SUM's factor) and checks it against the dtype. A factor given as a
// tensor on a GPU is left there when `deviceFactor` is given: *deviceFactor is that tensor and
// *factor stays 1.0 (the CUDA kernels read it on the device; a host path reads it with
// hostFactor). Otherwise the factor is read here.
RedOp toRingOp(const CheckScope& s, const c10d::ReduceOp& op, at::ScalarType t, double* factor,
               at::Tensor* deviceFactor = nullptr);
// The factor for a path that runs on the host: `factor`, or the device tensor's value (this
// waits for the caller's stream, as any `.item()`).
double hostFactor(double factor, const at::Tensor& deviceFactor);

// Dense, contiguous, on CPU or CUDA; `what` names the argument ("input", "output[2]").
void checkTensor(const CheckScope& s, const at::Tensor& t, std::string_view what);
// Exactly one tensor per call (one device per rank).
void checkSingle(const CheckScope& s, const std::vector<at::Tensor>& v, std::string_view what);
void checkSameDevice(const CheckScope& s, const at::Tensor& a, const at::Tensor& b);
void checkSameDType(const CheckScope& s, const at::Tensor& a, const at::Tensor& b,
                    const std::string& what);
void checkRoot(const CheckScope& s, int64_t root, const char* argument);
void checkNumel(const CheckScope& s, const at::Tensor& t, int64_t expected,
                const std::string& what, const std::string& why);
// Elements above INT64 byte ranges are refused; sizes are counted in int64 throughout.
void checkListSize(const CheckScope& s, size_t got, size_t expected, const std::string& what);

std::string shapeString(const at::Tensor& t);

// The bytes a call's tensors hold (undefined ones none): a sparse tensor counts its nonzero
// values and their indices, not its dense shape.
int64_t bytesHeld(const std::vector<at::Tensor>& tensors);

// The list forms (all_gather's outputs, reduce_scatter's inputs): exactly one list of one
// tensor per rank, each like `like` (dtype, device, as many elements: `sameSize` says why).
// `item` names its tensors in errors ("output" -> "output[2]").
void checkPerRankList(const CheckScope& s, const std::vector<std::vector<at::Tensor>>& lists,
                      const at::Tensor& like, const char* item, const char* sameSize);
// The single-tensor forms (all_gather_into_tensor, reduce_scatter_tensor and their coalesced
// lists): `whole` holds world-size times `part`'s elements, with the same dtype and device.
void checkBlockPair(const CheckScope& s, const at::Tensor& part, const std::string& partName,
                    const at::Tensor& whole, const std::string& wholeName);
// Their coalesced forms: as many `wholes` as `parts`, each pair as above, all on one device.
// Returns each pair's dtype.
std::vector<DType> checkBlockPairs(const CheckScope& s, const std::vector<at::Tensor>& parts,
                                   const char* partName, const std::vector<at::Tensor>& wholes,
                                   const char* wholeName);
// broadcast / reduce: one tensor, a valid root, rootTensor 0. Returns the root.
int checkRootedTensor(const CheckScope& s, const std::vector<at::Tensor>& tensors, int64_t root,
                      int64_t rootTensor, const char* rootName);
// gather / scatter: this rank's one tensor (`single`), a valid root, and the root's list of one
// tensor per rank like it (the other ranks pass none, or an empty one). Returns the root.
int checkRootedList(const CheckScope& s, const std::vector<at::Tensor>& single,
                    const char* singleName, int64_t root, const char* rootName,
                    const std::vector<std::vector<at::Tensor>>& lists, const char* item,
                    const char* sameSize);

// Whether the bytes of two tensors overlap (empty tensors overlap nothing).
bool overlaps(const at::Tensor& a, const at::Tensor& b);
// all_gather_into_tensor: an input inside the output must be exactly this rank's block (FSDP
// passes output.narrow() of it); any other overlap would be overwritten before it is sent.
void checkAllGatherAliasing(const CheckScope& s, const at::Tensor& input, const at::Tensor& output);

}  // namespace ring
