// Built only when CMake finds the CUDA toolkit and the NCCL header that the
// torch wheel was built with (AUTOACCEL_HAVE_NCCL).
#include "engine/distributed_nccl.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "engine/distributed.h"

namespace autoaccel {

bool HaveNccl() { return true; }

c10::intrusive_ptr<c10d::Backend> CreateNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

}  // namespace autoaccel
