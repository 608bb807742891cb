#include "server/job_archive.h"

#include <spdlog/spdlog.h>

#include <algorithm>

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
  absl::MutexLock lock(&mu_);
  unstored_[record.job_id] = Unstored{record, std::move(trials), answer};
}

absl::Status JobArchive::StoreJob(const Unstored& job, bool rewrite_trials) const {
  absl::Status stored = rewrite_trials ? store_->UpsertTrials(job.trials) : absl::OkStatus();
  if (stored.ok()) stored = store_->FinishJob(job.record, job.answer, &ReplacesStoredAnswer);
  return stored;
}

void JobArchive::Write(const std::string& job_id, bool rewrite_trials) {
  absl::MutexLock lock(&mu_);
  auto it = unstored_.find(job_id);
  if (it == unstored_.end() || it->second.failed) return;
  const absl::Status stored = StoreJob(it->second, rewrite_trials);
  if (stored.ok()) {
    unstored_.erase(it);
    return;
  }
  spdlog::error("job {}: storing the result failed ({}); keeping it in memory and retrying", job_id,
                stored.ToString());
  it->second.failed = true;
}

bool JobArchive::HasFailed() const {
  absl::MutexLock lock(&mu_);
  return std::any_of(unstored_.begin(), unstored_.end(),
                     [](const auto& entry) { return entry.second.failed; });
}

void JobArchive::Retry() {
  absl::MutexLock lock(&mu_);
  for (auto it = unstored_.begin(); it != unstored_.end();) {
    if (!it->second.failed || !StoreJob(it->second, /*rewrite_trials=*/true).ok()) {
      ++it;
      continue;
    }
    spdlog::info("job {}: stored at last", it->first);
    it = unstored_.erase(it);
  }
}

absl::Status JobArchive::Read(const std::string& job_id, JobRecord* record,
                              std::vector<TrialRecord>* trials) const {
  {
    absl::MutexLock lock(&mu_);
    auto unstored = unstored_.find(job_id);
    if (unstored != unstored_.end()) {
      *record = unstored->second.record;
      *trials = unstored->second.trials;
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
    if (unstored != unstored_.end()) return unstored->second.trials;
  }
  RETURN_IF_ERROR(store_->GetJob(job_id).status());  // NOT_FOUND
  return store_->ListTrialsFrom(job_id, start, count, include_pruned);
}

}  // namespace autoaccel
