// What clients read of jobs: a running job from memory (its records copied
// under the manager's lock, rendered without it), a finished one from the
// archive (without it).
#include <optional>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "server/job_manager.h"
#include "server/job_view.h"

namespace autoaccel {
namespace {

// Answers stay far below gRPC's 4 MB whatever the job's size.
constexpr int kMaxJobsListed = 500;
constexpr int kDefaultJobsListed = 50;
constexpr int kDefaultWorkersListed = 100;
constexpr int kMaxWorkersListed = 1000;
constexpr size_t kMaxWorkerPageBytes = size_t{2} << 20;  // the clients' limit is 4 MiB

}  // namespace

absl::StatusOr<v1::Job> JobManager::GetJob(const std::string& job_id) {
  std::optional<JobSnapshot> running;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) running = SnapshotLocked(*it->second);
  }
  if (running) return Render(*running);
  JobRecord record;
  std::vector<TrialRecord> trials;
  RETURN_IF_ERROR(archive_.Read(job_id, &record, &trials));
  return JobRecordToProto(record, trials, clock_->Now());
}

absl::StatusOr<v1::JobEvent> JobManager::GetJobEvent(const std::string& job_id,
                                                     uint64_t since_version, bool include_pruned,
                                                     uint64_t* version) {
  std::optional<JobSnapshot> running;
  std::vector<std::pair<TrialRecord, Strategy>> changed;  // rendered from their typed strategy
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) {
      const JobRun& job = *it->second;
      *version = job.version;
      if (job.version == since_version) return v1::JobEvent();  // nothing changed
      running = SnapshotLocked(job);
      for (const auto& t : job.trials) {
        if (t->version > since_version &&
            (include_pruned || t->record.status != TrialStatus::kPruned)) {
          changed.emplace_back(t->record, t->strategy);
        }
      }
    }
  }
  if (running) {
    v1::JobEvent event;
    ASSIGN_OR_RETURN(*event.mutable_job(), Render(*running));
    for (const auto& [record, strategy] : changed) {
      ASSIGN_OR_RETURN(*event.add_trials(), TrialToProto(record, &strategy));
    }
    return event;
  }
  *version = UINT64_MAX;  // finished: never changes again
  v1::JobEvent event;
  JobRecord record;
  std::vector<TrialRecord> trials;
  RETURN_IF_ERROR(archive_.Read(job_id, &record, &trials));
  ASSIGN_OR_RETURN(*event.mutable_job(), JobRecordToProto(record, trials, clock_->Now()));
  // Finished: what changed since `since_version` is no longer known, so a
  // watcher that saw the job running gets every trial that ran again (the
  // pruned ones only if it asked and has not had them yet).
  for (const TrialRecord& t : trials) {
    if (t.status != TrialStatus::kPruned || (include_pruned && since_version == 0)) {
      ASSIGN_OR_RETURN(*event.add_trials(), TrialToProto(t));
    }
  }
  return event;
}

absl::StatusOr<std::string> JobManager::JobOwner(const std::string& job_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) return it->second->record.owner;
  }
  ASSIGN_OR_RETURN(JobRecord record, store_->GetJob(job_id));
  return record.owner;
}

absl::StatusOr<std::vector<v1::Job>> JobManager::ListJobs(int limit,
                                                          const std::optional<std::string>& owner) {
  if (limit < 0) return absl::InvalidArgumentError("limit: must not be negative");
  limit = limit == 0 ? kDefaultJobsListed : std::min(limit, kMaxJobsListed);
  ASSIGN_OR_RETURN(std::vector<JobRecord> records,
                   owner ? store_->ListJobsOf(*owner, limit) : store_->ListJobs(limit));
  std::vector<v1::Job> jobs;
  for (const JobRecord& r : records) {
    ASSIGN_OR_RETURN(v1::Job job, GetJob(r.job_id));
    // A list carries no config text: 500 jobs of 256 KiB configs would not
    // fit any answer. GetJob has it.
    job.mutable_request()->mutable_model()->clear_config_json();
    jobs.push_back(std::move(job));
  }
  return jobs;
}

absl::StatusOr<std::vector<v1::Trial>> JobManager::ListTrials(const std::string& job_id) {
  uint64_t version = 0;
  ASSIGN_OR_RETURN(v1::JobEvent event, GetJobEvent(job_id, 0, /*include_pruned=*/true, &version));
  return std::vector<v1::Trial>(event.trials().begin(), event.trials().end());
}

absl::StatusOr<v1::ListTrialsResponse> JobManager::ListTrialsPage(
    const v1::ListTrialsRequest& request) {
  ASSIGN_OR_RETURN(const TrialPage page, ParseTrialPage(request));
  std::vector<TrialRecord> trials;
  std::vector<Strategy> strategies;  // a running job's, rendered as they are
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(request.job_id());
    if (it != active_.end()) {
      trials = TrialRecords(*it->second);
      for (const auto& t : it->second->trials) strategies.push_back(t->strategy);
    }
  }
  if (!trials.empty()) {
    return TrialPageToProto(trials, page, request.include_pruned(), &strategies);
  }
  // A finished job: this page only (one more trial tells whether another
  // page follows).
  ASSIGN_OR_RETURN(trials, archive_.ReadTrials(request.job_id(), page.start, page.size + 1,
                                               request.include_pruned()));
  return TrialPageToProto(trials, page, request.include_pruned());
}

JobManager::JobSnapshot JobManager::SnapshotLocked(const JobRun& job) const {
  return JobSnapshot{job.record, TrialRecords(job), job.spec.request};
}

absl::StatusOr<v1::Job> JobManager::Render(const JobSnapshot& job) const {
  const absl::Time now = clock_->Now();
  ASSIGN_OR_RETURN(v1::Job out, JobRecordToProto(job.record, job.trials, now, &job.request));
  out.set_elapsed_seconds(absl::ToDoubleSeconds(now - job.record.created_at));
  return out;
}

SchedulerCensus JobManager::Census() {
  absl::ReaderMutexLock lock(&mu_);
  SchedulerCensus census;
  for (const auto& [id, job] : active_) {
    ++census.unfinished_jobs[job->record.state];
    census.trials_running += job->running;
    census.trials_queued += static_cast<int>(job->retries.size() + job->confirmations.size());
  }
  census.rank_calls_in_flight = rpcs_in_flight_;
  return census;
}

std::string JobManager::MetricsText() { return metrics_.Render(Census(), pool_.Census()); }

absl::StatusOr<v1::ListWorkersResponse> JobManager::ListWorkers(
    const v1::ListWorkersRequest& request) {
  if (request.limit() < 0) return absl::InvalidArgumentError("limit: must not be negative");
  const int limit =
      request.limit() == 0 ? kDefaultWorkersListed : std::min(request.limit(), kMaxWorkersListed);
  WorkerPool::Page page = pool_.List(request.page_token(), limit, kMaxWorkerPageBytes);
  v1::ListWorkersResponse out;
  for (v1::Worker& w : page.workers) *out.add_workers() = std::move(w);
  out.set_next_page_token(page.next);
  const PoolCensus census = pool_.Census();
  out.set_workers_total(census.workers_healthy + census.workers_quarantined + census.workers_lost);
  out.set_workers_healthy(census.workers_healthy);
  for (const auto& [type, d] : census.devices) {
    out.set_devices_total(out.devices_total() + d.free + d.held + d.unavailable);
    out.set_devices_free(out.devices_free() + d.free);
  }
  return out;
}

}  // namespace autoaccel
