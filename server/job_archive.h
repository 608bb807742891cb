// Finished jobs: their final write to the store, and reads of them.
//
// A job ends once: it is kept here in memory as it ends (Finish, under the
// job manager's lock) and answered from here until its final write
// (Write, made by the manager's writer after the lock is let go,
// server/job_writer.h) stores its record and, where asked, its trials
// together with the strategy-database answer it offers. If that write
// fails the job stays here (clients never see it go back to RUNNING) and
// is written again by Retry() until the store takes it. A job an
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

  // Keeps the finished job (REQUIRES: IsTerminal(record.state)) with its
  // trials and the answer it offers the strategy database, answered from
  // memory until Write(job_id) stores it. Writes nothing.
  void Finish(const JobRecord& record, std::vector<TrialRecord> trials,
              const std::optional<StrategyRecord>& answer);
  // Writes the job Finish kept: its record and answer, and its trials first
  // when `rewrite_trials` (their earlier writes failed). On a store error
  // (logged) the job stays in memory, answered from there and written again
  // by Retry(): nothing is lost, so there is nothing for the caller to
  // handle. A job not kept (or already written) is ignored.
  void Write(const std::string& job_id, bool rewrite_trials);
  // True when some job's final write failed and waits for Retry().
  bool HasFailed() const;
  // Writes again every job whose final write failed, with its trials and
  // answer; keeps those that fail again. Jobs not yet written once are left
  // to their Write.
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
    bool failed = false;  // written once, and that failed: Retry() writes it
  };
  // Writes the job, its trials first when `rewrite_trials`.
  absl::Status StoreJob(const Unstored& job, bool rewrite_trials) const;

  Store* const store_;
  mutable absl::Mutex mu_;
  std::map<std::string, Unstored> unstored_ ABSL_GUARDED_BY(mu_);  // by job id
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_ARCHIVE_H_
