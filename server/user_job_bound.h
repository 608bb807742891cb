// The per-user bound on unfinished jobs (Limit::kJobsPerUser,
// server/request_limits.h): each owner's unfinished jobs, counted from the
// moment a submission passes the bound (before its record is written and
// it becomes active, so that submissions arriving together cannot all pass
// it) until the job ends or the submission is refused after all.
//
// Thread-safe; calls nothing.
#ifndef AUTOACCEL_SERVER_USER_JOB_BOUND_H_
#define AUTOACCEL_SERVER_USER_JOB_BOUND_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace autoaccel {

class UserJobBound {
 public:
  // Counts one more unfinished job of `owner`, or, when that would pass the
  // bound, counts nothing and returns RESOURCE_EXHAUSTED naming the user
  // and the bound. An empty owner (users not authenticated) is never
  // bounded nor counted.
  absl::Status Admit(const std::string& owner);
  // Counts a job of `owner` without checking the bound (one an earlier
  // server process left unfinished and this one goes on with).
  void Count(const std::string& owner);
  // A job counted for `owner` ended, or its submission was refused after
  // Admit.
  void Release(const std::string& owner);

 private:
  absl::Mutex mu_;
  std::map<std::string, int> unfinished_ ABSL_GUARDED_BY(mu_);  // by owner, only those > 0
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_USER_JOB_BOUND_H_
