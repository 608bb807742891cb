#include "engine/cpu_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace autoaccel {
namespace {

// Wraps c10::alloc_cpu/free_cpu (the default allocator's own functions, so
// alignment and NUMA behaviour stay the same). The deleter gets only the data
// pointer, so sizes are kept in a map under the mutex; a training step makes
// a few thousand allocations at most, far too few for the lock to matter.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const int64_t n = static_cast<int64_t>(nbytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t limit = limit_.load(std::memory_order_relaxed);
      if (limit > 0 && in_use_ + n > limit) {
        TORCH_CHECK_WITH(OutOfMemoryError, false,
                         "CPU tensor memory limit exceeded: tried to allocate ", nbytes,
                         " bytes with ", in_use_, " bytes in use (limit ", limit, " bytes)");
      }
      // Reserved before the allocation so that concurrent callers cannot
      // overshoot the limit together.
      in_use_ += n;
      peak_ = std::max(peak_, in_use_);
    }
    void* data = nullptr;
    try {
      data = c10::alloc_cpu(nbytes);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_ -= n;
      throw;
    }
    if (data != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_.emplace(data, n);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_ -= n;  // zero-byte allocation
    }
    return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  void Free(void* data) {
    if (data == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(data);
      if (it != sizes_.end()) {
        in_use_ -= it->second;
        sizes_.erase(it);
      }
    }
    c10::free_cpu(data);
  }

  int64_t in_use() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_;
  }
  int64_t peak() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }
  void ResetPeak() {
    std::lock_guard<std::mutex> lock(mu_);
    peak_ = in_use_;
  }
  void set_limit(int64_t limit) { limit_.store(limit, std::memory_order_relaxed); }
  int64_t limit() const { return limit_.load(std::memory_order_relaxed); }

 private:
  static void Delete(void* data);

  std::mutex mu_;
  std::unordered_map<void*, int64_t> sizes_;  // guarded by mu_
  int64_t in_use_ = 0;                        // guarded by mu_
  int64_t peak_ = 0;                          // guarded by mu_
  std::atomic<int64_t> limit_{0};
};

// Never destroyed: tensors may be freed during static destruction.
CountingCpuAllocator* Instance() {
  static auto* instance = new CountingCpuAllocator();
  return instance;
}

void CountingCpuAllocator::Delete(void* data) { Instance()->Free(data); }

// Higher than the default CPU allocator's priority (0).
constexpr uint8_t kAllocatorPriority = 100;

std::atomic<bool> g_installed{false};

}  // namespace

void KeepFreedMemoryInTheHeap() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

absl::Status InstallCountingCpuAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::SetCPUAllocator(Instance(), kAllocatorPriority);
    g_installed.store(c10::GetCPUAllocator() == Instance());
  });
  if (!g_installed.load()) {
    return absl::InternalError(
        "could not install the counting CPU allocator: LibTorch kept another one");
  }
  return absl::OkStatus();
}

bool CountingCpuAllocatorInstalled() { return g_installed.load(); }
int64_t CpuTensorBytesInUse() { return Instance()->in_use(); }
int64_t CpuTensorPeakBytes() { return Instance()->peak(); }
void ResetCpuPeakBytes() { Instance()->ResetPeak(); }
void SetCpuTensorMemoryLimit(int64_t limit_bytes) {
  Instance()->set_limit(std::max<int64_t>(limit_bytes, 0));
}
int64_t CpuTensorMemoryLimit() { return Instance()->limit(); }

int64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

}  // namespace autoaccel
