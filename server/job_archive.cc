#include "server/job_archive.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "server/database_answer.h"

namespace autoaccel {

absl::Status JobArchive::CloseUnfinished(JobRecord job, std::vector<TrialRecord> trials,
                                         const std::string& why, absl::Time now) {
  // Closed honestly rather than left RUNNING forever.
  std::vector<TrialRecord> changed;
  for (TrialRecord& t : trials) {
    if (IsTerminal(t.status)) continue;
    t.status = TrialStatus::kFailed;
    t.reason = why;
    t.finished_at = now;
    changed.push_back(t);
  }
  RETURN_IF_ERROR(store_->UpsertTrials(changed));
  job.state = JobState::kFailed;
  job.status_message = why;
  job.finished_at = now;
  RETURN_IF_ERROR(store_->FinishJob(job, std::nullopt));
  spdlog::warn("job {} was left unfinished by an earlier server and cannot go on: {}", job.job_id,
               why);
  return absl::OkStatus();
}

void JobArchive::Finish(const JobRecord& record, std::vector<TrialRecord> trials,
                        const std::optional<StrategyRecord>& answer) {
  auto job = std::make_shared<const Unstored>(Unstored{record, std::move(trials), answer});
  absl::MutexLock lock(&mu_);
  unstored_[record.job_id] = Entry{std::move(job), false};
}

absl::Status JobArchive::StoreJob(const Unstored& job, bool rewrite_trials) const {
  absl::Status stored = rewrite_trials ? store_->UpsertTrials(job.trials) : absl::OkStatus();
  if (stored.ok()) stored = store_->FinishJob(job.record, job.answer, &ReplacesStoredAnswer);
  return stored;
}

void JobArchive::Write(const std::string& job_id, bool rewrite_trials) {
  std::shared_ptr<const Unstored> job;
  {
    absl::MutexLock lock(&mu_);
    auto it = unstored_.find(job_id);
    if (it == unstored_.end() || it->second.failed) return;
    job = it->second.job;
  }
  const absl::Status stored = StoreJob(*job, rewrite_trials);
  absl::MutexLock lock(&mu_);
  auto it = unstored_.find(job_id);
  if (it == unstored_.end()) return;
  if (stored.ok()) {
    unstored_.erase(it);
    return;
  }
  spdlog::error("job {}: storing the result failed ({}); keeping it in memory and retrying", job_id,
                stored.ToString());
  it->second.failed = true;
  ++failed_;
}

bool JobArchive::HasFailed() const {
  absl::MutexLock lock(&mu_);
  return failed_ > 0;
}

void JobArchive::Retry() {
  std::vector<std::pair<std::string, std::shared_ptr<const Unstored>>> failed;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : unstored_) {
      if (entry.failed) failed.emplace_back(id, entry.job);
    }
  }
  for (const auto& [id, job] : failed) {
    if (!StoreJob(*job, /*rewrite_trials=*/true).ok()) continue;
    spdlog::info("job {}: stored at last", id);
    absl::MutexLock lock(&mu_);
    if (unstored_.erase(id) > 0) --failed_;
  }
}

absl::Status JobArchive::Read(const std::string& job_id, JobRecord* record,
                              std::vector<TrialRecord>* trials) const {
  {
    absl::MutexLock lock(&mu_);
    auto unstored = unstored_.find(job_id);
    if (unstored != unstored_.end()) {
      *record = unstored->second.job->record;
      *trials = unstored->second.job->trials;
      return absl::OkStatus();
    }
  }
  ASSIGN_OR_RETURN(*record, store_->GetJob(job_id));
  ASSIGN_OR_RETURN(*trials, store_->ListTrials(job_id));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TrialRecord>> JobArchive::ReadTrials(const std::string& job_id,
                                                                int start, int count,
                                                                bool include_pruned) const {
  {
    absl::MutexLock lock(&mu_);
    auto unstored = unstored_.find(job_id);
    if (unstored != unstored_.end()) return unstored->second.job->trials;
  }
  RETURN_IF_ERROR(store_->GetJob(job_id).status());  // NOT_FOUND
  return store_->ListTrialsFrom(job_id, start, count, include_pruned);
}

}  // namespace autoaccel
