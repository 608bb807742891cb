#include "worker/trial_dir_janitor.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;

// A failed rank's directory is kept this many times as long.
constexpr int kFailedFactor = 4;

bool AllDigits(absl::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

}  // namespace

absl::StatusOr<TrialDirLimit> ParseTrialDirLimit(const std::string& text) {
  TrialDirLimit limit;
  if (text == "all") return limit;
  int count = 0;
  if (absl::SimpleAtoi(text, &count) && count > 0) {
    limit.count = count;
    return limit;
  }
  absl::Duration age;
  int days = 0;
  if (!text.empty() && text.back() == 'd' &&
      absl::SimpleAtoi(text.substr(0, text.size() - 1), &days) && days > 0) {
    limit.age = absl::Hours(24) * days;
  } else if (absl::ParseDuration(text, &age) && age > absl::ZeroDuration()) {
    limit.age = age;
  }
  if (limit.age > absl::ZeroDuration()) return limit;
  return absl::InvalidArgumentError(absl::StrCat(
      "--keep-trial-dirs ", text, ": expected a count (200), an age (6h, 30m, 2d) or all"));
}

bool IsRankDirName(const std::string& name) {
  const size_t r = name.rfind("-r");
  if (r == std::string::npos || !AllDigits(absl::string_view(name).substr(r + 2))) return false;
  const size_t a = name.rfind("-a", r);
  return a != std::string::npos && a > 0 &&
         AllDigits(absl::string_view(name).substr(a + 2, r - a - 2));
}

TrialDirJanitor::TrialDirJanitor(std::string work_dir, TrialDirLimit limit)
    : work_dir_(std::move(work_dir)), limit_(limit) {}

void TrialDirJanitor::AdoptExisting() {
  std::vector<std::pair<absl::Time, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(work_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || !IsRankDirName(it->path().filename().string())) continue;
    struct stat st;
    if (::stat(it->path().c_str(), &st) != 0) continue;
    found.emplace_back(absl::FromTimeT(st.st_mtime), it->path().string());
  }
  std::sort(found.begin(), found.end());
  absl::MutexLock lock(&mu_);
  for (auto& [when, dir] : found) failed_.push_back({std::move(dir), when});
  PruneLocked(&failed_, kFailedFactor * limit_.count, kFailedFactor * limit_.age, absl::Now());
}

void TrialDirJanitor::Finished(const std::string& dir, bool failed, absl::Time now) {
  absl::MutexLock lock(&mu_);
  (failed ? failed_ : succeeded_).push_back({dir, now});
  PruneLocked(&succeeded_, limit_.count, limit_.age, now);
  PruneLocked(&failed_, kFailedFactor * limit_.count, kFailedFactor * limit_.age, now);
}

void TrialDirJanitor::PruneLocked(std::deque<Entry>* entries, int count, absl::Duration age,
                                  absl::Time now) {
  if (limit_.keeps_all()) return;
  while (!entries->empty()) {
    const Entry& oldest = entries->front();
    const bool too_many = count > 0 && static_cast<int>(entries->size()) > count;
    const bool too_old = age > absl::ZeroDuration() && now - oldest.finished > age;
    if (!too_many && !too_old) break;
    std::error_code ec;
    // Only a rank's directory under the work dir, whatever was recorded.
    const fs::path path(oldest.dir);
    if (IsRankDirName(path.filename().string()) &&
        fs::equivalent(path.parent_path(), work_dir_, ec)) {
      fs::remove_all(path, ec);
      if (ec) spdlog::warn("cannot remove the trial directory {}: {}", oldest.dir, ec.message());
    }
    entries->pop_front();
  }
}

}  // namespace autoaccel
