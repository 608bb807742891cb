// Tensors on disk in the safetensors format, which Python (the `safetensors`
// package, bundled with transformers, or a few lines of `struct` + `json`)
// and this engine both read and write:
//
//   8 bytes    N, little-endian uint64: length of the header
//   N bytes    JSON object: {"NAME": {"dtype": "F32", "shape": [2, 3],
//              "data_offsets": [BEGIN, END]}, ..., "__metadata__": {"k": "v"}}
//              (padded with spaces to a multiple of 8 bytes when written here)
//   the rest   raw little-endian, row-major tensor data; BEGIN/END are byte
//              offsets into this part
//
// dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
// (https://huggingface.co/docs/safetensors; transformers checkpoints use it,
// so model.safetensors files load here, given the same parameter names.)
#ifndef AUTOACCEL_ENGINE_WEIGHTS_H_
#define AUTOACCEL_ENGINE_WEIGHTS_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace autoaccel {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Reads every tensor of a safetensors file onto the CPU, sorted by name, and
// its "__metadata__" into `*metadata` when given. NOT_FOUND when the file
// cannot be opened; INVALID_ARGUMENT naming the file (and the tensor) when it
// is malformed: short, bad header, unknown dtype, offsets outside the data or
// not matching the shape.
absl::StatusOr<NamedTensors> ReadSafetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

// Writes `tensors` (any device; copied to CPU, made contiguous) and
// `metadata` to `path`, through PATH.tmp and a rename so that a reader never
// sees half a file. INVALID_ARGUMENT for an unsupported dtype or a repeated
// name; INTERNAL when the file cannot be written.
absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Copies the tensors of the safetensors file `path` into the parameters and
// buffers of `module` with the same names (as module.named_parameters() and
// named_buffers() spell them: "model.layers.0.self_attn.q_proj.weight",
// "model.layers.3.mlp.gate.e_score_correction_bias"), converting dtype and
// device. All or nothing: every parameter and buffer must have a tensor of
// its shape in the file and every tensor in the file must name one
// (floating-point for floating-point), else INVALID_ARGUMENT listing what is
// missing, unexpected or of another shape, and nothing is changed. Errors of
// ReadSafetensors pass through.
absl::Status LoadWeights(torch::nn::Module& module, const std::string& path);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_WEIGHTS_H_
