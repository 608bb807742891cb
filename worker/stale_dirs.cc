#include "worker/stale_dirs.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace autoaccel {
namespace fs = std::filesystem;

bool IsLiveWorker(pid_t pid) {
  std::ifstream comm(absl::StrCat("/proc/", pid, "/comm"));
  std::string name;
  // The kernel keeps 15 characters of the name: "autoaccel-worke".
  return comm && std::getline(comm, name) && absl::StartsWith("autoaccel-worker", name) &&
         name.size() >= 15;
}

namespace {

// The shared-memory directories of worker `pid` under `shm_root`.
int RemoveShmDirs(pid_t pid, const std::string& shm_root) {
  int removed = 0;
  std::error_code ec;
  const std::string prefix = absl::StrCat("autoaccel-", pid, "-");
  for (const fs::directory_entry& e : fs::directory_iterator(shm_root, ec)) {
    if (!absl::StartsWith(e.path().filename().native(), prefix)) continue;
    std::error_code gone;
    if (fs::remove_all(e.path(), gone) > 0 && !gone) ++removed;
  }
  return removed;
}

}  // namespace

SweptDirs RemoveWorkerDirs(pid_t pid, const std::string& work_dir, const std::string& shm_root) {
  SweptDirs swept;
  std::error_code ec;
  if (fs::remove_all(absl::StrCat(work_dir, "/sandbox-", pid), ec) > 0 && !ec) ++swept.sandbox;
  swept.shm = RemoveShmDirs(pid, shm_root);
  return swept;
}

SweptDirs SweepDeadWorkersDirs(const std::string& work_dir, const std::string& shm_root) {
  SweptDirs swept;
  std::error_code ec;
  std::vector<pid_t> dead;
  for (const fs::directory_entry& e : fs::directory_iterator(work_dir, ec)) {
    absl::string_view name = e.path().filename().native();
    pid_t pid = 0;
    if (!absl::ConsumePrefix(&name, "sandbox-") || !absl::SimpleAtoi(name, &pid) || pid <= 0 ||
        !e.is_directory(ec) || IsLiveWorker(pid)) {
      continue;
    }
    dead.push_back(pid);
    if (fs::remove_all(e.path(), ec) > 0 && !ec) ++swept.sandbox;
  }
  for (pid_t pid : dead) swept.shm += RemoveShmDirs(pid, shm_root);
  return swept;
}

}  // namespace autoaccel
