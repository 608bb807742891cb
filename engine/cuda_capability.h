// The compute capability of a CUDA device, kept in a translation unit of its
// own: only it needs the CUDA headers (cuda_capability.cc, built with
// distributed_nccl.cc when CMake finds the toolkit), and a build without them
// links cuda_capability_none.cc instead.
#ifndef AUTOACCEL_ENGINE_CUDA_CAPABILITY_H_
#define AUTOACCEL_ENGINE_CUDA_CAPABILITY_H_

#include <optional>
#include <utility>

namespace autoaccel {

// {major, minor} of CUDA device `index` (e.g. {9, 0} for an H100); nullopt
// when this build has no CUDA headers and so cannot ask. REQUIRES: CUDA is
// available and `index` names one of its devices (trainer.h's ParseDevice
// checks both); otherwise throws c10::Error. Any thread.
std::optional<std::pair<int, int>> CudaComputeCapability(int index);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_CUDA_CAPABILITY_H_
