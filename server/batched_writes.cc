#include "server/batched_writes.h"

#include <utility>
#include <vector>

namespace autoaccel {

void BatchedWrites::Begin() { active_ = true; }

void BatchedWrites::Keep(const JobRecord& job) { jobs_.insert_or_assign(job.job_id, job); }

void BatchedWrites::Keep(const TrialRecord& trial) {
  trials_.insert_or_assign(trial.trial_id, trial);
}

std::map<std::string, absl::Status> BatchedWrites::End(Store* store) {
  active_ = false;
  std::map<std::string, absl::Status> failed;
  if (jobs_.empty() && trials_.empty()) return failed;
  std::vector<JobRecord> jobs;
  std::vector<TrialRecord> trials;
  jobs.reserve(jobs_.size());
  trials.reserve(trials_.size());
  for (auto& [id, job] : jobs_) jobs.push_back(std::move(job));
  for (auto& [id, trial] : trials_) trials.push_back(std::move(trial));
  jobs_.clear();
  trials_.clear();
  if (store->WriteJobsAndTrials(jobs, trials).ok()) return failed;
  for (const JobRecord& job : jobs) {
    if (absl::Status s = store->UpdateJob(job); !s.ok()) failed.emplace(job.job_id, s);
  }
  for (const TrialRecord& trial : trials) {
    if (absl::Status s = store->UpsertTrial(trial); !s.ok()) failed.emplace(trial.job_id, s);
  }
  return failed;
}

}  // namespace autoaccel
