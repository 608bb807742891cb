#include "server/user_job_bound.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/request_limits.h"

namespace autoaccel {

absl::Status UserJobBound::Admit(const std::string& owner) {
  if (owner.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = unfinished_.find(owner);
  const int64_t now = it == unfinished_.end() ? 0 : it->second;
  RETURN_IF_ERROR(CheckLimit(Limit::kJobsPerUser, now + 1, absl::StrCat("jobs of user ", owner)));
  ++unfinished_[owner];
  return absl::OkStatus();
}

void UserJobBound::Count(const std::string& owner) {
  if (owner.empty()) return;
  absl::MutexLock lock(&mu_);
  ++unfinished_[owner];
}

void UserJobBound::Release(const std::string& owner) {
  if (owner.empty()) return;
  absl::MutexLock lock(&mu_);
  auto it = unfinished_.find(owner);
  if (it == unfinished_.end()) return;
  if (--it->second <= 0) unfinished_.erase(it);
}

}  // namespace autoaccel
