// `autoaccel logs` on the coordinator: finds the worker that ran a rank of a
// trial's last attempt and relays that worker's ReadRankLogs answer
// (worker/rank_logs.h) over the channel the coordinator already holds to it
// (its session token; the worker refuses anyone else). Whether the caller
// may see the trial is the service's check (server/service.h); this only
// locates and relays. Thread-safe; `manager` and `executor` must outlive it.
#ifndef AUTOACCEL_SERVER_TRIAL_LOGS_H_
#define AUTOACCEL_SERVER_TRIAL_LOGS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"
#include "server/job_manager.h"
#include "server/trial_executor.h"

namespace autoaccel {

// The job a request's trial belongs to: request.job_id, or the job part of
// request.trial_id ("<job id>-tNNNN"). INVALID_ARGUMENT when neither names
// one.
absl::StatusOr<std::string> TrialLogsJobId(const v1::GetTrialLogsRequest& request);

class TrialLogRelay {
 public:
  // How long a worker may take to answer.
  static constexpr absl::Duration kWorkerTimeout = absl::Seconds(10);

  TrialLogRelay(JobManager* manager, TrialExecutor* executor)
      : manager_(manager), executor_(executor) {}

  using Done = std::function<void(absl::StatusOr<v1::TrialLogs>)>;
  // Calls `done` once, on any thread. NOT_FOUND for an unknown job or trial
  // (or an index past the job's trials); FAILED_PRECONDITION for a trial
  // that never ran (PRUNED, or PENDING), or whose worker is no longer in
  // the pool; INVALID_ARGUMENT for a rank outside the trial's ranks; the
  // worker's own errors prefixed with the worker's id (INVALID_ARGUMENT for
  // tail_lines outside what it reads, NOT_FOUND when the rank's directory is
  // gone, UNAVAILABLE when it cannot be reached).
  void Fetch(const v1::GetTrialLogsRequest& request, Done done);

 private:
  JobManager* const manager_;
  TrialExecutor* const executor_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_TRIAL_LOGS_H_
