#include "server/job_writer.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace autoaccel {

JobWriter::Batch& JobWriter::Batch::operator=(Batch&& other) noexcept {
  if (this == &other) return *this;
  if (writer_ != nullptr && turn_ != 0) writer_->Write(std::move(*this));
  writer_ = other.writer_;
  turn_ = other.turn_;
  jobs = std::move(other.jobs);
  trials = std::move(other.trials);
  finished = std::move(other.finished);
  other.writer_ = nullptr;
  other.turn_ = 0;
  return *this;
}

JobWriter::Batch::~Batch() {
  if (writer_ != nullptr && turn_ != 0) writer_->Write(std::move(*this));
}

void JobWriter::Keep(const JobRecord& job) {
  absl::MutexLock lock(&keep_mu_);
  jobs_.insert_or_assign(job.job_id, job);
}

void JobWriter::Keep(const TrialRecord& trial) {
  absl::MutexLock lock(&keep_mu_);
  trials_.insert_or_assign(trial.trial_id, trial);
}

void JobWriter::KeepFinished(const std::string& job_id, bool rewrite_trials) {
  absl::MutexLock lock(&keep_mu_);
  finished_[job_id] = finished_[job_id] || rewrite_trials;
}

JobWriter::Batch JobWriter::Take() {
  absl::MutexLock lock(&keep_mu_);
  Batch batch;
  if (jobs_.empty() && trials_.empty() && finished_.empty()) return batch;
  batch.writer_ = this;
  batch.turn_ = ++turns_taken_;
  batch.jobs.reserve(jobs_.size());
  batch.trials.reserve(trials_.size());
  for (auto& [id, job] : jobs_) batch.jobs.push_back(std::move(job));
  for (auto& [id, trial] : trials_) batch.trials.push_back(std::move(trial));
  batch.finished = std::move(finished_);
  jobs_.clear();
  trials_.clear();
  finished_.clear();
  return batch;
}

void JobWriter::Write(Batch batch) {
  if (batch.turn_ == 0 && !archive_->HasFailed()) return;
  absl::MutexLock lock(&write_mu_);
  if (batch.turn_ != 0) {
    // Written only when the turn before it is (turns_written_ is guarded
    // by write_mu_, which Await holds while it evaluates this).
    const uint64_t before = batch.turn_ - 1;
    const auto my_turn = [this, before]()
                             ABSL_NO_THREAD_SAFETY_ANALYSIS { return turns_written_ == before; };
    write_mu_.Await(absl::Condition(&my_turn));
  }
  std::map<std::string, absl::Status> failed = WriteRecords(batch);
  for (const auto& [job_id, status] : failed) {
    spdlog::error("job {}: store update failed: {}", job_id, status.ToString());
  }
  {
    absl::MutexLock keep(&keep_mu_);
    for (auto& [job_id, rewrite] : batch.finished) {
      rewrite = rewrite || failed.count(job_id) > 0 || failures_.count(job_id) > 0;
      failures_.erase(job_id);  // nothing is left to end
    }
    for (auto& [job_id, status] : failed) {
      if (batch.finished.count(job_id) == 0) failures_.emplace(job_id, std::move(status));
    }
  }
  for (const auto& [job_id, rewrite] : batch.finished) archive_->Write(job_id, rewrite);
  if (archive_->HasFailed()) archive_->Retry();
  if (batch.turn_ != 0) ++turns_written_;
  batch.turn_ = 0;  // written: its destructor writes nothing
}

std::map<std::string, absl::Status> JobWriter::WriteRecords(const Batch& batch) const {
  std::map<std::string, absl::Status> failed;
  if (batch.jobs.empty() && batch.trials.empty()) return failed;
  if (store_->WriteJobsAndTrials(batch.jobs, batch.trials).ok()) return failed;
  for (const JobRecord& job : batch.jobs) {
    if (absl::Status s = store_->UpdateJob(job); !s.ok()) failed.emplace(job.job_id, s);
  }
  for (const TrialRecord& trial : batch.trials) {
    if (absl::Status s = store_->UpsertTrial(trial); !s.ok()) failed.emplace(trial.job_id, s);
  }
  return failed;
}

std::map<std::string, absl::Status> JobWriter::TakeFailures() {
  absl::MutexLock lock(&keep_mu_);
  return std::exchange(failures_, {});
}

}  // namespace autoaccel
