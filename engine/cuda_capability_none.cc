// Linked instead of cuda_capability.cc when the build has no CUDA toolkit:
// the capability is unknown, and a CUDA kernel that needs more than the
// device has fails when it runs.
#include "engine/cuda_capability.h"

namespace autoaccel {

std::optional<std::pair<int, int>> CudaComputeCapability(int) { return std::nullopt; }

}  // namespace autoaccel
