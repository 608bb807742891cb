// The NCCL backend, kept in a translation unit of its own: only it needs the
// CUDA and NCCL headers (distributed_nccl.cc, built when CMake finds them),
// and a build without them links distributed_no_nccl.cc instead.
#ifndef AUTOACCEL_ENGINE_DISTRIBUTED_NCCL_H_
#define AUTOACCEL_ENGINE_DISTRIBUTED_NCCL_H_

#include <chrono>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace autoaccel {

// A ProcessGroupNCCL of `size` ranks meeting through `store`. Throws
// c10::Error when the build has no NCCL path (HaveNccl() false).
c10::intrusive_ptr<c10d::Backend> CreateNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_DISTRIBUTED_NCCL_H_
