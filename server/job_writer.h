// The job manager's writes to the store, made after its lock is let go.
//
// While the manager holds its lock it changes jobs and trials in memory and
// keeps their records here (Keep); a job that ends is kept in the archive's
// memory (server/job_archive.h) and here by id (KeepFinished). Before the
// lock is let go, the manager takes what this hold kept (Take: a Batch with
// its turn); after, it writes the batch (Write) and only then sends the
// hold's RunTrials and cancels: a trial is RUNNING in the store before any
// worker runs it. A batch of hundreds of records costs one transaction, not
// hundreds (at 1,000 workers the commits were a fifth of the coordinator's
// time, bench/scale.py), and readers and the scheduler's next batch never
// wait for the disk.
//
// Order: batches are written in the order they were taken (each waits for
// the earlier turns), so a record never goes back to an older version, and
// a finished job's final write follows every earlier write of its trials.
// A job's record is seen by readers from memory (the manager's, or the
// archive's) until it is written.
//
// Failures: a transaction that fails is written again record by record, so
// that each error is charged to its job; the errors wait for the manager's
// next look (TakeFailures: the job then ends FAILED naming the error). A
// finished job whose trials' earlier writes failed is written with all its
// trials. A final write that fails stays in the archive, written again by
// the next Write (JobArchive::Retry).
//
// Thread-safe. Keep, KeepFinished, Take and TakeFailures are called with the
// manager's lock held (their order is the holds' order); Write without it,
// from any thread. Write takes no lock of the manager's: a batch dropped
// under its lock (the Batch's destructor writes it) only waits for the
// earlier turns' writes.
#ifndef AUTOACCEL_SERVER_JOB_WRITER_H_
#define AUTOACCEL_SERVER_JOB_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/job_archive.h"
#include "server/store/store.h"

namespace autoaccel {

class JobWriter {
 public:
  // One hold's writes, in its turn. Move-only; written by JobWriter::Write,
  // or by its destructor if it never was (so that later turns never wait
  // for a batch that was dropped).
  class Batch {
   public:
    Batch() = default;
    Batch(Batch&& other) noexcept { *this = std::move(other); }
    Batch& operator=(Batch&& other) noexcept;
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;
    ~Batch();
    bool empty() const { return turn_ == 0; }

   private:
    friend class JobWriter;
    JobWriter* writer_ = nullptr;
    uint64_t turn_ = 0;  // 0: nothing to write
    std::vector<JobRecord> jobs;
    std::vector<TrialRecord> trials;
    std::map<std::string, bool> finished;  // job id -> rewrite its trials
  };

  // `store` and `archive` must outlive the writer.
  JobWriter(Store* store, JobArchive* archive) : store_(store), archive_(archive) {}

  // Keeps the record for this hold's batch; a later version of the same job
  // or trial replaces it.
  void Keep(const JobRecord& job);
  void Keep(const TrialRecord& trial);
  // The job, kept by JobArchive::Finish, is written after the batch's
  // records, with its trials when `rewrite_trials` or when a write of its
  // records failed since the manager last took the failures.
  void KeepFinished(const std::string& job_id, bool rewrite_trials);
  // What was kept since the last Take, with the next turn (none when empty).
  Batch Take();

  // Writes the batch once the earlier turns are written, then retries the
  // archive's failed final writes.
  void Write(Batch batch);

  // The jobs whose writes failed since the last call, each with its first
  // error.
  std::map<std::string, absl::Status> TakeFailures();

 private:
  // Writes the records: one transaction, or each record alone when it
  // fails. Returns each failing job's first error.
  std::map<std::string, absl::Status> WriteRecords(const Batch& batch) const;

  Store* const store_;
  JobArchive* const archive_;

  // Held while a batch is written: one writer at a time, in turn order.
  absl::Mutex write_mu_;
  uint64_t turns_written_ ABSL_GUARDED_BY(write_mu_) = 0;

  // What the holds keep, the turns handed out, and the failures not yet
  // taken; never held while the store is written.
  absl::Mutex keep_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  std::map<std::string, JobRecord> jobs_ ABSL_GUARDED_BY(keep_mu_);      // by job id
  std::map<std::string, TrialRecord> trials_ ABSL_GUARDED_BY(keep_mu_);  // by trial id
  std::map<std::string, bool> finished_ ABSL_GUARDED_BY(keep_mu_);
  uint64_t turns_taken_ ABSL_GUARDED_BY(keep_mu_) = 0;
  std::map<std::string, absl::Status> failures_ ABSL_GUARDED_BY(keep_mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_WRITER_H_
