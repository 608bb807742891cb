// Linked instead of distributed_nccl.cc when the build has no CUDA toolkit or
// NCCL header: multi-rank trials then run on CPU (gloo) only.
#include <c10/util/Exception.h>

#include "engine/distributed.h"
#include "engine/distributed_nccl.h"

namespace autoaccel {

bool HaveNccl() { return false; }

c10::intrusive_ptr<c10d::Backend> CreateNcclBackend(const c10::intrusive_ptr<c10d::Store>&, int,
                                                    int, std::chrono::milliseconds) {
  TORCH_CHECK(false, "this trial runner was built without NCCL");
}

}  // namespace autoaccel
