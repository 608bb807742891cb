// Keeps the worker's work dir from growing with every trial: the directories
// of finished ranks (WORK_DIR/<RankFileStem>: spec, result, logs, a
// launcher's files) beyond a limit are removed, the oldest first. A failed
// rank's directory (FAILED, OOM, TIMEOUT: its logs are what a user reads)
// is kept four times as long as one that succeeded or was cancelled.
// Nothing else of the work dir (models/, launcher-cache/, sandbox/) is ever
// touched.
//
// Thread-safe: ranks finish on their own threads.
#ifndef AUTOACCEL_WORKER_TRIAL_DIR_JANITOR_H_
#define AUTOACCEL_WORKER_TRIAL_DIR_JANITOR_H_

#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autoaccel {

// --keep-trial-dirs: the newest `count` directories of ranks that did not
// fail, or those younger than `age`; failed ranks' x4. Neither set: keep all.
struct TrialDirLimit {
  int count = 0;
  absl::Duration age = absl::ZeroDuration();
  bool keeps_all() const { return count <= 0 && age <= absl::ZeroDuration(); }
};

// "200" (a count), "6h" / "30m" / "2d" (an age), "all". INVALID_ARGUMENT
// naming the flag for anything else.
absl::StatusOr<TrialDirLimit> ParseTrialDirLimit(const std::string& text);

// True for a work dir entry named like a rank's directory: "...-aN-rM".
bool IsRankDirName(const std::string& name);

class TrialDirJanitor {
 public:
  TrialDirJanitor(std::string work_dir, TrialDirLimit limit);

  // Takes in the rank directories already in the work dir (a restarted
  // worker's), oldest first by modification time, as failures (their
  // outcome is unknown, so they are kept longest), and prunes.
  void AdoptExisting();

  // The rank that ran in `dir` (under the work dir) ended at `now`, failed
  // or not; then the directories beyond the limit are removed.
  void Finished(const std::string& dir, bool failed, absl::Time now);

 private:
  struct Entry {
    std::string dir;
    absl::Time finished;
  };
  void PruneLocked(std::deque<Entry>* entries, int count, absl::Duration age, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string work_dir_;
  const TrialDirLimit limit_;
  absl::Mutex mu_;
  std::deque<Entry> succeeded_ ABSL_GUARDED_BY(mu_);  // oldest first
  std::deque<Entry> failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_TRIAL_DIR_JANITOR_H_
