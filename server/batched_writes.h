// The job and trial writes of one batch of the scheduler's work (answers
// applied, or trials dispatched, under one hold of the manager's lock),
// written together in one transaction when the batch ends, before the lock
// is let go and before any RunTrial of the batch is sent: a batch of
// hundreds costs one commit, not hundreds (at 1,000 workers the commits
// were a fifth of the coordinator's time, bench/scale.py). Outside a batch
// nothing is kept: the caller writes at once.
//
// Not thread-safe: the manager's lock guards it.
#ifndef AUTOACCEL_SERVER_BATCHED_WRITES_H_
#define AUTOACCEL_SERVER_BATCHED_WRITES_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "server/store/store.h"

namespace autoaccel {

class BatchedWrites {
 public:
  // Starts keeping writes. REQUIRES: not active.
  void Begin();
  bool active() const { return active_; }
  // Keeps the record for the batch's end; a later version of the same job
  // or trial replaces it. REQUIRES: active.
  void Keep(const JobRecord& job);
  void Keep(const TrialRecord& trial);
  // Writes what was kept in one transaction (Store::WriteJobsAndTrials);
  // when that fails, each record on its own, so that an error is charged to
  // the job whose record it is. Returns each failing job's first error, by
  // job id. The batch ends (nothing is kept until the next Begin).
  std::map<std::string, absl::Status> End(Store* store);

 private:
  bool active_ = false;
  std::map<std::string, JobRecord> jobs_;      // by job id
  std::map<std::string, TrialRecord> trials_;  // by trial id: a job's trials together
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_BATCHED_WRITES_H_
