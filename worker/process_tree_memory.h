// The resident memory of a launcher rank: the script and every process it
// started (data loader workers, compile workers) share its process group,
// so their RSS summed from /proc is what the rank costs the machine. Linux
// only.
#ifndef AUTOACCEL_WORKER_PROCESS_TREE_MEMORY_H_
#define AUTOACCEL_WORKER_PROCESS_TREE_MEMORY_H_

#include <sys/types.h>

#include <cstdint>

namespace autoaccel {

// The summed resident set (bytes) of the live processes whose process group
// is `pgid`, read from /proc/PID/stat; 0 when there are none. A process
// that exits while being read is skipped. Thread-safe.
int64_t ProcessGroupRssBytes(pid_t pgid);

// Polled while a rank runs; keeps the largest sum seen. Not thread-safe.
class ProcessTreeMemory {
 public:
  explicit ProcessTreeMemory(pid_t pgid) : pgid_(pgid) {}
  // Reads the group's RSS now, returns it and raises peak() to it.
  int64_t Poll();
  int64_t peak() const { return peak_; }

 private:
  pid_t pgid_;
  int64_t peak_ = 0;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_PROCESS_TREE_MEMORY_H_
