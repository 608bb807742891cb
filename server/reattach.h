// Re-attaching to trials after a coordinator restart: which of the ranks a
// worker reports as it registers again belong to trials that wait for
// them, and which waiting trials that registration completes or gives up.
// The job manager holds the reported ranks' devices in the pool, attaches
// them (AttachReportedRank) and then acts on the verdicts: a trial whose
// ranks are all back is taken up again (RunTrial with attach_only), one
// whose worker came back without its rank runs again as its next attempt
// (server/job_resume.h tells how trials come to wait).
//
// Plain functions of their arguments (the jobs are read, and only
// AttachReportedRank changes a trial); the caller holds whatever guards
// the jobs.
#ifndef AUTOACCEL_SERVER_REATTACH_H_
#define AUTOACCEL_SERVER_REATTACH_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proto/autoaccel.pb.h"
#include "server/job_run.h"
#include "server/worker_pool.h"

namespace autoaccel {

// What a registration's running_ranks mean.
struct ReportedRanks {
  // Ranks a waiting trial expects on this worker, in the order reported.
  struct Attach {
    TrialRun* trial = nullptr;
    const v1::RunningRank* rank = nullptr;  // within the registration
  };
  std::vector<Attach> attach;
  // (trial id, attempt) of ranks nobody waits for (their job ended, or the
  // attempt was run again elsewhere): to be cancelled on the worker, each once.
  std::vector<std::pair<std::string, int>> cancel;
};

// Matches `registration`'s running ranks against the trials of `jobs`: a
// rank is awaited when its trial is RUNNING in that attempt, awaiting
// re-attachment, placed that rank on this worker, and not yet attached.
// A rank of such a trial already attached is neither attached nor cancelled.
ReportedRanks MatchReportedRanks(const std::map<std::string, std::shared_ptr<JobRun>>& jobs,
                                 const v1::RegisterRequest& registration);

// Attaches `rank` to `trial` on the device the pool held for it (`placed`):
// rank 0's reported rendezvous port becomes the trial's.
void AttachReportedRank(TrialRun* trial, const v1::RunningRank& rank, PlacedRank placed);

// The trials waiting for re-attachment that ran ranks on `worker`, judged
// once its registration's ranks are attached: `complete` when every rank of
// the trial is attached, `missing` when a rank on this worker was not
// reported. In `order` (job ids) and trial order.
struct AwaitingVerdicts {
  std::vector<std::pair<JobRun*, TrialRun*>> complete, missing;
};
AwaitingVerdicts JudgeAwaitingTrials(const std::map<std::string, std::shared_ptr<JobRun>>& jobs,
                                     const std::vector<std::string>& order,
                                     const std::string& worker);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_REATTACH_H_
