#include "worker/launcher_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;

// One cache a script's tools keep: the variable that moves it and its
// directory under the launcher's cache.
struct CacheRow {
  const char* variable;
  const char* subdir;
  bool hf = false;  // only with LauncherCache::hf_home
};
constexpr CacheRow kCaches[] = {
    {"TORCH_EXTENSIONS_DIR", "torch_extensions"},  // cpp_extension.load: DeepSpeed's ops
    {"TRITON_CACHE_DIR", "triton"},
    {"TORCHINDUCTOR_CACHE_DIR", "torchinductor"},  // torch.compile
    {"CUDA_CACHE_PATH", "nv"},                     // the driver's PTX JIT cache
    {"PIP_CACHE_DIR", "pip"},
    {"HF_HOME", "huggingface", true},
};

}  // namespace

absl::StatusOr<std::string> PrepareLauncherCache(const LauncherCache& cache,
                                                 const std::string& name, const Sandbox* sandbox) {
  if (cache.root.empty()) return std::string();
  const std::string dir = absl::StrCat(cache.root, "/", name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot make launcher '", name, "''s cache ", dir, ": ", ec.message()));
  }
  if (sandbox != nullptr && sandbox->policy().run_as_user) {
    // Given once (what the rank writes in it is its user's already); again
    // only when the sandbox user changed since.
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || st.st_uid != sandbox->policy().uid) {
      RETURN_IF_ERROR(sandbox->GiveToRank(dir));
    }
  }
  return dir;
}

std::vector<std::pair<std::string, std::string>> LauncherCacheEnvironment(
    const std::string& dir, bool hf_home,
    const std::vector<std::pair<std::string, std::string>>& launcher_env) {
  std::vector<std::pair<std::string, std::string>> out;
  if (dir.empty()) return out;
  for (const CacheRow& row : kCaches) {
    if (row.hf && !hf_home) continue;
    const bool set_by_launcher =
        std::any_of(launcher_env.begin(), launcher_env.end(),
                    [&row](const auto& var) { return var.first == row.variable; });
    if (!set_by_launcher) out.emplace_back(row.variable, absl::StrCat(dir, "/", row.subdir));
  }
  return out;
}

}  // namespace autoaccel
