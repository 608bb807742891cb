// The persistent cache of a launcher's ranks on one worker: what a training
// script compiles or downloads once (torch extensions such as DeepSpeed's
// JIT ops, Triton kernels, torch.compile's artifacts, CUDA's JIT cache,
// pip's wheels, and Hugging Face's hub when the operator allows it) is kept
// in WORKER_CACHE/LAUNCHER/ and shared by every trial of that launcher, in
// every job, instead of being rebuilt in each rank's fresh trial directory.
//
// Every trial of a launcher writes its cache: trials of different users'
// jobs share it (a launcher runs the operator's script, not user code).
// Thread-safe (no state; PrepareLauncherCache may run on several ranks'
// threads at once).
#ifndef AUTOACCEL_WORKER_LAUNCHER_CACHE_H_
#define AUTOACCEL_WORKER_LAUNCHER_CACHE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/sandbox.h"

namespace autoaccel {

struct LauncherCache {
  std::string root;      // absolute; "" = no cache (autoaccel-worker --launcher-cache off)
  bool hf_home = false;  // HF_HOME too (--launcher-cache-hf)
};

// Launcher `name`'s cache directory under `cache.root`, made if missing and
// made the rank's user's when ranks run as another user (`sandbox` may be
// null: no sandbox). "" when the cache is off. INTERNAL when it cannot be
// made or given.
absl::StatusOr<std::string> PrepareLauncherCache(const LauncherCache& cache,
                                                 const std::string& name, const Sandbox* sandbox);

// The variables that point the caches at `dir` (one row per cache:
// TORCH_EXTENSIONS_DIR, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR,
// CUDA_CACHE_PATH, PIP_CACHE_DIR, and HF_HOME when `hf_home`), leaving out
// those `launcher_env` sets (the operator's own choice stands). Pure.
std::vector<std::pair<std::string, std::string>> LauncherCacheEnvironment(
    const std::string& dir, bool hf_home,
    const std::vector<std::pair<std::string, std::string>>& launcher_env);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_LAUNCHER_CACHE_H_
