// Tensor-memory accounting on CPU, standing in for a GPU caching allocator's
// statistics: a counting CPU allocator that every CPU tensor of the process is
// allocated through once it is installed. It tracks the bytes of live tensor
// memory and their peak, and enforces an optional limit by throwing
// c10::OutOfMemoryError, which the trial runner reports as status OOM.
//
// Only tensor storage is counted: scratch memory that kernels (oneDNN, BLAS)
// take from malloc directly is not, nor is the process's other heap. The
// resident set (getrusage) covers those; see PeakRssBytes().
#ifndef AUTOACCEL_ENGINE_CPU_MEMORY_H_
#define AUTOACCEL_ENGINE_CPU_MEMORY_H_

#include <cstdint>

#include "absl/status/status.h"

namespace autoaccel {

// Keeps the blocks a training step frees in the process's heap for the next
// step, instead of returning them to the kernel: glibc's malloc serves
// blocks above its mmap threshold (128 KiB until such a block is freed) with
// a fresh mapping and trims the heap's top above 128 KiB, so every step's
// activations fault in newly zeroed pages (on the engine-vs-PyTorch bench
// model, 24,000 page faults a step and a fifth of its time). Raises the mmap
// threshold to 64 MiB and the trim threshold to 256 MiB (mallopt). Call once,
// before training; any thread.
void KeepFreedMemoryInTheHeap();

// Installs the counting allocator as the process's CPU allocator; later calls
// do nothing. Tensors allocated before the first call keep their old deleter
// and are never counted. Returns INTERNAL when LibTorch does not pick it up
// (another allocator registered with a higher priority).
// Thread-safe.
absl::Status InstallCountingCpuAllocator();

// True once InstallCountingCpuAllocator() has succeeded.
bool CountingCpuAllocatorInstalled();

// Bytes of live CPU tensor memory allocated through the counting allocator.
int64_t CpuTensorBytesInUse();

// Highest CpuTensorBytesInUse() since the last ResetCpuPeakBytes().
int64_t CpuTensorPeakBytes();

// Sets the peak to the bytes in use now.
void ResetCpuPeakBytes();

// An allocation that would take the bytes in use above `limit_bytes` throws
// c10::OutOfMemoryError instead; 0 means no limit. Applies to allocations made
// after the call, on every thread.
void SetCpuTensorMemoryLimit(int64_t limit_bytes);
int64_t CpuTensorMemoryLimit();

// Peak resident set size of this process so far (getrusage ru_maxrss), bytes.
int64_t PeakRssBytes();

// Scoped limit: sets it, restores the previous one on destruction.
class ScopedCpuTensorMemoryLimit {
 public:
  explicit ScopedCpuTensorMemoryLimit(int64_t limit_bytes) : previous_(CpuTensorMemoryLimit()) {
    SetCpuTensorMemoryLimit(limit_bytes);
  }
  ~ScopedCpuTensorMemoryLimit() { SetCpuTensorMemoryLimit(previous_); }
  ScopedCpuTensorMemoryLimit(const ScopedCpuTensorMemoryLimit&) = delete;
  ScopedCpuTensorMemoryLimit& operator=(const ScopedCpuTensorMemoryLimit&) = delete;

 private:
  int64_t previous_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_CPU_MEMORY_H_
