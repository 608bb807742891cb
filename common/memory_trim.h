// Gives memory the process freed back to the system. glibc's malloc keeps
// freed memory of its heaps for reuse: after a burst of large requests
// (a coordinator receiving TorchScript files of hundreds of MiB, whose gRPC
// buffers are many small blocks) the freed blocks stay in the resident set
// until malloc_trim returns the whole pages among them. A thread does so
// every `every`; it costs milliseconds.
#ifndef AUTOACCEL_COMMON_MEMORY_TRIM_H_
#define AUTOACCEL_COMMON_MEMORY_TRIM_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autoaccel {

// Runs from construction to destruction (which stops and joins the thread).
class PeriodicMemoryTrim {
 public:
  explicit PeriodicMemoryTrim(absl::Duration every);
  ~PeriodicMemoryTrim();
  PeriodicMemoryTrim(const PeriodicMemoryTrim&) = delete;
  PeriodicMemoryTrim& operator=(const PeriodicMemoryTrim&) = delete;

 private:
  const absl::Duration every_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_MEMORY_TRIM_H_
