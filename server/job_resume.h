// Jobs an earlier coordinator process left unfinished (it was killed, or
// shut down while they ran), taken up again by the next one on the same
// database: the running state rebuilt from the stored job and trials.
//
// The time limit keeps counting from the original submission (the stored
// deadline stays). Trials the earlier process was running are not followed
// across the restart: each such attempt is recorded as failed outside the
// strategy ("interrupted by a coordinator restart") and the trial waits for
// its next attempt, like any attempt a lost worker cut short, or is given up
// after the job's last attempt (JobManager's retry rules) — unless its workers report its ranks
// still running (or answered) when they register again within the reattach window: then the
// coordinator attaches to them (JobManager::RegisterWorker) and the attempt goes on. The job's
// searcher is created afresh once workers are back, and takes up the recorded trials
// (ResumedTrials, search/searcher.h Searcher::Resume), so none is counted or measured twice.
//
// ResumeJob and ResumedTrials are plain functions of their arguments;
// LoadUnfinishedJobs reads the store and the kept model files once, at the
// coordinator's start, and hands the manager every job ready to go on (as
// Ray's GCS loads its tables once and hands them to each manager). Nothing
// here locks or sends.
#ifndef AUTOACCEL_SERVER_JOB_RESUME_H_
#define AUTOACCEL_SERVER_JOB_RESUME_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "search/searcher.h"
#include "server/job_archive.h"
#include "server/job_run.h"
#include "server/model_file_store.h"
#include "server/store/store.h"
#include "server/tune_request.h"

namespace autoaccel {

// What an interrupted attempt's failure says ("attempt 2: interrupted by a
// coordinator restart").
inline constexpr char kInterruptedByRestart[] = "interrupted by a coordinator restart";

// The unfinished job `record` with its stored `trials` (in proposal order),
// ready to go on: its request validated again into its spec (a launcher
// job's with the launcher it was accepted with), its trials as recorded,
// those that were RUNNING awaiting their workers until `reattach_until`
// (TrialRun.awaiting_reattach; the job manager runs them again as their
// next attempt, or gives them up, if they are not reported by then), the
// PENDING ones back in their queues, and the search marked over when
// confirmations had begun. `model_file`: a torchscript job's file as the
// coordinator kept it (server/model_file_store.h; the stored request holds
// none), nullopt when none was kept. INVALID_ARGUMENT when the stored
// request or launcher no longer parses or validates, a torchscript job's
// file was not kept or no longer matches the job's signature, or a trial's
// strategy does not parse: the job cannot go on.
absl::StatusOr<std::unique_ptr<JobRun>> ResumeJob(const JobRecord& record,
                                                  std::vector<TrialRecord> trials,
                                                  const TuneDefaults& defaults,
                                                  absl::Time reattach_until,
                                                  std::optional<std::string> model_file);

// What LoadUnfinishedJobs reads from and writes to; borrowed for the call.
struct ResumeSources {
  Store* store = nullptr;
  ModelFileStore* model_files = nullptr;
  JobArchive* archive = nullptr;  // closes a job that cannot go on
  TuneDefaults defaults;
  absl::Time now;
  absl::Duration reattach_window;  // how long running trials await their workers
};

// Every job a previous process left unfinished (Store::ListUnfinishedJobs),
// made ready to go on (ResumeJob), in the order stored: a torchscript job
// with the file the coordinator kept for it, an engine job with its warm
// start read (as SubmitJob's admission reads it), its record's message
// saying it was resumed and how many trials await their workers (written
// back). A job that cannot go on is closed FAILED through the archive with
// ResumeJob's reason and its file deleted; so are the kept files of jobs
// that finished while no process could delete them. The store's error when
// reading the jobs, or writing one, fails.
absl::StatusOr<std::vector<std::unique_ptr<JobRun>>> LoadUnfinishedJobs(
    const ResumeSources& sources);

// The job's trials as its next searcher takes them up (Searcher::Resume):
// every proposal and pruned candidate, in proposal order, confirmations
// left out; a trial lost to infrastructure failures counts as cancelled (it
// measured nothing), as the searcher heard of it.
std::vector<ResumedTrial> ResumedTrials(const JobRun& job);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_RESUME_H_
