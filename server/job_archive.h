// Finished jobs: their final write to the store, and reads of them.
//
// A job ends once; its record and trials are written together with the
// strategy-database answer it offers. If that write fails the job is kept
// here in memory, answered from here (clients never see it go back to
// RUNNING) and written again by Retry() until the store takes it. A job an
// earlier server process left unfinished that cannot go on
// (server/job_resume.h) is closed FAILED at start.
//
// Thread-safe; never calls out but to the store.
#ifndef AUTOACCEL_SERVER_JOB_ARCHIVE_H_
#define AUTOACCEL_SERVER_JOB_ARCHIVE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/store.h"

namespace autoaccel {

class JobArchive {
 public:
  // `store` must outlive the archive.
  explicit JobArchive(Store* store) : store_(store) {}

  // Closes the unfinished `job` FAILED with `why` at `now`, its unfinished
  // `trials` with it. The store's error, if any.
  absl::Status CloseUnfinished(JobRecord job, std::vector<TrialRecord> trials,
                               const std::string& why, absl::Time now);

  // Writes the finished job (REQUIRES: IsTerminal(record.state)) with its
  // trials when `rewrite_trials` (their earlier writes failed) and the
  // answer it offers the strategy database. On a store error (logged) the
  // job is kept in memory, answered from there and written again by Retry():
  // nothing is lost, so there is nothing for the caller to handle.
  void Finish(const JobRecord& record, std::vector<TrialRecord> trials, bool rewrite_trials,
              const std::optional<StrategyRecord>& answer);
  // Writes again every job whose final write failed, with its trials and
  // answer; keeps those that fail again.
  void Retry();

  // The finished job and all its trials (in proposal order). NOT_FOUND for
  // a job the store does not know.
  absl::Status Read(const std::string& job_id, JobRecord* record,
                    std::vector<TrialRecord>* trials) const;
  // The trials of the finished job from proposal index `start` on, pruned
  // ones only with `include_pruned`: up to `count` of them read from the
  // store, or every trial of a job still held in memory (the caller pages
  // them, server/job_view.h TrialPageToProto). NOT_FOUND as Read().
  absl::StatusOr<std::vector<TrialRecord>> ReadTrials(const std::string& job_id, int start,
                                                      int count, bool include_pruned) const;

 private:
  struct Unstored {
    JobRecord record;
    std::vector<TrialRecord> trials;
    std::optional<StrategyRecord> answer;
  };

  Store* const store_;
  mutable absl::Mutex mu_;
  std::map<std::string, Unstored> unstored_ ABSL_GUARDED_BY(mu_);  // by job id
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_ARCHIVE_H_
