// Built only with distributed_nccl.cc (the CUDA toolkit's headers are here).
#include "engine/cuda_capability.h"

#include <ATen/cuda/CUDAContext.h>

namespace autoaccel {

std::optional<std::pair<int, int>> CudaComputeCapability(int index) {
  const cudaDeviceProp* properties =
      at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  return std::make_pair(properties->major, properties->minor);
}

}  // namespace autoaccel
