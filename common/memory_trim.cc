#include "common/memory_trim.h"

#include <malloc.h>

namespace autoaccel {

PeriodicMemoryTrim::PeriodicMemoryTrim(absl::Duration every) : every_(every) {
  thread_ = std::thread([this] {
    mu_.Lock();
    while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), every_)) {
      mu_.Unlock();
      ::malloc_trim(0);
      mu_.Lock();
    }
    mu_.Unlock();
  });
}

PeriodicMemoryTrim::~PeriodicMemoryTrim() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

}  // namespace autoaccel
