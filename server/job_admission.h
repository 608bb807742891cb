// What a submission becomes before the scheduler sees it: SubmitJob's work
// that needs no job state, done without the manager's lock — the launcher
// looked up in the worker pool, the request validated into a JobSpec
// (server/tune_request.h), its signature, the strategy database's verdict
// (server/database_answer.h: an answer at once, or why not), the warm
// start's earlier trials (server/warm_start.h), a TorchScript file put to
// disk under the job's id (server/model_file_store.h), and the job's record;
// then the record written (Create). What needs the manager's state (making
// the job active) stays in JobManager::SubmitJob, with the per-user bound
// (server/user_job_bound.h) checked between the two.
//
// Errors: NOT_FOUND for a launcher no worker offers; INVALID_ARGUMENT
// naming the field (ValidateTuneRequest); RESOURCE_EXHAUSTED when a model
// file would pass a cap; INTERNAL when it cannot be written; the database
// answer's error when a stored answer cannot be rendered. A database that
// cannot be read is no error: the job tunes (or starts cold), with a
// warning in the log.
//
// Ownership: the collaborators are borrowed and must outlive the admission.
// Thread-safe: it keeps no state of its own but a counter for job ids, and
// every collaborator it calls is thread-safe.
#ifndef AUTOACCEL_SERVER_JOB_ADMISSION_H_
#define AUTOACCEL_SERVER_JOB_ADMISSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "proto/autoaccel.pb.h"
#include "server/job_run.h"
#include "server/model_file_store.h"
#include "server/store/store.h"
#include "server/tune_request.h"
#include "server/warm_start.h"
#include "server/worker_pool.h"

namespace autoaccel {

// A submission admitted: its job with the record assembled (QUEUED; or
// SUCCEEDED with the stored answer when `answered`), its spec validated, a
// TorchScript job's file on disk (spec.model_file: the caller removes it if
// the job is not created after all).
struct AdmittedJob {
  std::unique_ptr<JobRun> job;
  // The strategy database answered it: finished as it is created, never
  // active, with no warm start and no model file.
  bool answered = false;
};

class JobAdmission {
 public:
  JobAdmission(Store* store, const WorkerPool* pool, ModelFileStore* model_files,
               EarlierTrialsCache* earlier_trials, const Clock* clock, TuneDefaults defaults)
      : store_(store),
        pool_(pool),
        model_files_(model_files),
        earlier_trials_(earlier_trials),
        clock_(clock),
        defaults_(std::move(defaults)) {}

  // `request` from `owner` ("" without tokens) as a new job (NewJobId).
  absl::StatusOr<AdmittedJob> Admit(v1::TuneRequest request, const std::string& owner);
  // Writes the admitted job's record (Store::CreateJob), under another id
  // when its id is taken (not for a TorchScript job, whose file is kept
  // under the id), and logs it. The store's error when it cannot.
  absl::Status Create(JobRun* job, bool answered);
  // "job-<UTC time>-<48 random bits>": a thousand jobs submitted in one
  // second collide with odds of about one in a billion (Create draws again
  // if they do).
  std::string NewJobId();

 private:
  Store* const store_;
  const WorkerPool* const pool_;
  ModelFileStore* const model_files_;
  EarlierTrialsCache* const earlier_trials_;
  const Clock* const clock_;
  const TuneDefaults defaults_;
  std::atomic<uint64_t> job_counter_{0};
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_ADMISSION_H_
