#include "server/trial_logs.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace autoaccel {

absl::StatusOr<std::string> TrialLogsJobId(const v1::GetTrialLogsRequest& request) {
  if (request.trial_id().empty()) {
    if (request.job_id().empty()) {
      return absl::InvalidArgumentError("trial_id: missing (or job_id and index)");
    }
    return request.job_id();
  }
  const std::string& id = request.trial_id();
  const size_t cut = id.rfind("-t");
  const bool digits =
      cut != std::string::npos && cut + 2 < id.size() &&
      std::all_of(id.begin() + cut + 2, id.end(), [](char c) { return absl::ascii_isdigit(c); });
  if (!digits || cut == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trial_id: '", id, "' is not a trial id (JOB-tNNNN, as `trials --json` shows)"));
  }
  return id.substr(0, cut);
}

namespace {

// The trial the request names among the job's trials.
absl::StatusOr<v1::Trial> FindTrial(const std::vector<v1::Trial>& trials,
                                    const v1::GetTrialLogsRequest& request,
                                    const std::string& job_id) {
  for (const v1::Trial& t : trials) {
    if (request.trial_id().empty() ? t.index() == request.index()
                                   : t.trial_id() == request.trial_id()) {
      return t;
    }
  }
  return absl::NotFoundError(request.trial_id().empty()
                                 ? absl::StrCat("job ", job_id, " has no trial #", request.index(),
                                                " (it has ", trials.size(), ")")
                                 : absl::StrCat("trial ", request.trial_id(), " not found"));
}

// The worker and the call that reads the rank's logs there.
struct RankOnWorker {
  std::string worker_id;
  v1::ReadRankLogsRequest call;
};

absl::StatusOr<RankOnWorker> Locate(JobManager* manager, const v1::GetTrialLogsRequest& request) {
  ASSIGN_OR_RETURN(const std::string job_id, TrialLogsJobId(request));
  ASSIGN_OR_RETURN(const std::vector<v1::Trial> trials, manager->ListTrials(job_id));
  ASSIGN_OR_RETURN(const v1::Trial trial, FindTrial(trials, request, job_id));
  if (trial.worker_ids().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("trial ", trial.trial_id(), " never ran (",
                                                      trial.status(), "): it has no logs"));
  }
  if (request.rank() < 0 || request.rank() >= trial.worker_ids_size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank: trial ", trial.trial_id(),
                                                   " has ranks 0 to ", trial.worker_ids_size() - 1,
                                                   ", got ", request.rank()));
  }
  RankOnWorker where;
  where.worker_id = trial.worker_ids(request.rank());
  where.call.set_trial_id(trial.trial_id());
  where.call.set_attempt(trial.attempt());
  where.call.set_rank(request.rank());
  where.call.set_tail_lines(request.tail_lines());
  return where;
}

}  // namespace

void TrialLogRelay::Fetch(const v1::GetTrialLogsRequest& request, Done done) {
  absl::StatusOr<RankOnWorker> where = Locate(manager_, request);
  absl::StatusOr<WorkerEndpoint> endpoint =
      where.ok() ? manager_->WorkerEndpointOf(where->worker_id) : where.status();
  if (!endpoint.ok()) {
    const absl::Status& s = endpoint.status();
    // A worker gone from the pool cannot be asked: not a missing trial.
    done(where.ok() ? absl::FailedPreconditionError(s.message()) : s);
    return;
  }
  v1::TrialLogs head;
  head.set_trial_id(where->call.trial_id());
  head.set_attempt(where->call.attempt());
  head.set_rank(where->call.rank());
  head.set_worker_id(where->worker_id);
  executor_->ReadRankLogs(
      *endpoint, where->call, kWorkerTimeout,
      [head = std::move(head), done = std::move(done)](absl::StatusOr<v1::RankLogs> logs) mutable {
        if (!logs.ok()) {
          done(absl::Status(logs.status().code(), absl::StrCat("worker ", head.worker_id(), ": ",
                                                               logs.status().message())));
          return;
        }
        *head.mutable_logs() = std::move(*logs);
        done(std::move(head));
      });
}

}  // namespace autoaccel
