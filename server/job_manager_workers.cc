// JobManager's side of the worker pool (server/job_manager.h): workers
// registering, heartbeating and leaving, workers lost (their ranks failed
// as infrastructure failures), and, after a coordinator restart, the ranks
// a re-registering worker reports taken up again (server/reattach.h) or
// given up.
#include <spdlog/spdlog.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/json_log.h"
#include "common/status_macros.h"
#include "server/job_manager.h"
#include "server/job_resume.h"
#include "server/reattach.h"

namespace autoaccel {

absl::StatusOr<v1::RegisterResponse> JobManager::RegisterWorker(const v1::RegisterRequest& req) {
  std::string session_token;
  Outbox out;
  {
    // Registered and its ranks held in one step: no tick places a new
    // trial on a device a reported rank runs on.
    Hold hold(this, &out);
    ASSIGN_OR_RETURN(session_token, pool_.Register(req));
    TakeUpRanksLocked(req, session_token, &out);
    inbox_.Wake();
  }
  SendAll(std::move(out));
  v1::RegisterResponse resp;
  resp.set_heartbeat_interval_seconds(absl::ToDoubleSeconds(options_.heartbeat_interval));
  resp.set_session_token(std::move(session_token));
  return resp;
}

absl::Status JobManager::Heartbeat(const std::string& worker_id, const std::string& session_token,
                                   double timing_jitter) {
  ASSIGN_OR_RETURN(const bool back, pool_.Heartbeat(worker_id, session_token, timing_jitter));
  if (back) inbox_.Wake();
  return absl::OkStatus();
}

absl::Status JobManager::LeaveWorker(const std::string& worker_id,
                                     const std::string& session_token) {
  RETURN_IF_ERROR(pool_.Leave(worker_id, session_token));
  inbox_.Wake();  // jobs waiting on the pool re-check what it has
  return absl::OkStatus();
}

std::vector<v1::Worker> JobManager::ListWorkers() { return pool_.List(); }

absl::StatusOr<WorkerEndpoint> JobManager::WorkerEndpointOf(const std::string& worker_id) {
  return pool_.Endpoint(worker_id);
}

void JobManager::TakeUpRanksLocked(const v1::RegisterRequest& req, const std::string& session_token,
                                   Outbox* out) {
  const std::string& worker = req.worker_id();
  const ReportedRanks reported = MatchReportedRanks(active_, req);
  for (const ReportedRanks::Attach& a : reported.attach) {
    const v1::RunningRank& r = *a.rank;
    std::optional<PlacedRank> placed = pool_.Hold(worker, r.device_index(), r.trial_id(),
                                                  r.attempt(), r.rank(), r.rendezvous_port());
    if (placed) AttachReportedRank(a.trial, r, *std::move(placed));
  }
  for (const auto& [trial_id, attempt] : reported.cancel) {
    // Nobody here waits for it (its job ended, or it was run again): stop it.
    Cancel c;
    c.to = WorkerEndpoint{req.address(), session_token, req.tls()};
    c.request.set_trial_id(trial_id);
    c.request.set_attempt(attempt);
    out->cancels.push_back(std::move(c));
    spdlog::info("worker {} reports trial {} attempt {}, which no job runs now; cancelling it",
                 worker, trial_id, attempt);
  }
  if (awaiting_reattach_ == 0) return;
  const AwaitingVerdicts verdicts = JudgeAwaitingTrials(active_, active_order_, worker);
  for (const auto& [job, trial] : verdicts.missing) {
    GiveUpReattachLocked(job, trial,
                         absl::StrCat("worker ", worker, " registered again without it"), out);
  }
  for (const auto& [job, trial] : verdicts.complete) ReattachLocked(job, trial, out);
}

void JobManager::ReattachLocked(JobRun* job, TrialRun* trial, Outbox* out) {
  trial->awaiting_reattach = false;
  --awaiting_reattach_;
  QueueRankCallsLocked(*job, *trial, /*attach_only=*/true, out);
  spdlog::info("job {}: trial {} attempt {} taken up again on {} after the restart",
               job->record.job_id, trial->record.index, trial->record.attempt,
               trial->record.worker_id);
}

void JobManager::StopAwaitingLocked(TrialRun* trial) {
  if (!trial->awaiting_reattach) return;
  trial->awaiting_reattach = false;
  --awaiting_reattach_;
  for (size_t i = 0; i < trial->ranks.size(); ++i) {
    if (!trial->ranks[i].placed.address.empty()) {
      pool_.Release(trial->record.trial_id, trial->record.attempt, static_cast<int>(i));
    }
  }
}

void JobManager::GiveUpReattachLocked(JobRun* job, TrialRun* trial, const std::string& why,
                                      Outbox* out) {
  const LogContext context(job->record.job_id, trial->record.trial_id);
  StopAwaitingLocked(trial);
  CancelRanks(*trial, out);  // those its workers reported
  RankOutcome outcome;
  outcome.infrastructure = true;
  outcome.reason = absl::StrCat(kInterruptedByRestart, " (", why, ")");
  trial->infrastructure_failure = outcome;
  RetryOrGiveUpLocked(job, trial, out);
}

void JobManager::FailRanksOfLostWorkersLocked(Outbox* out) {
  pool_.ForgetSilent(options_.forget_lost_workers_after);
  for (const LostWorker& lost : pool_.ExpireSilent(options_.worker_timeout)) {
    const std::string silent = absl::FormatDuration(lost.silent);
    for (const std::string& job_id : std::vector<std::string>(active_order_)) {
      auto job = active_.find(job_id);
      if (job == active_.end()) continue;  // ended by an earlier lost rank
      for (size_t i = 0; i < job->second->trials.size(); ++i) {
        TrialRun* t = job->second->trials[i].get();
        // (A trial awaiting its workers after a restart has its own window.)
        if (t->record.status != TrialStatus::kRunning || t->awaiting_reattach) continue;
        // Its ranks there will never answer (their RPCs still hold the
        // devices until they come back); the reason names the first one.
        const int lost_rank = MarkRanksLost(t, lost.worker_id);
        if (lost_rank < 0) continue;
        const LogContext context(job_id, t->record.trial_id, lost_rank);
        RankOutcome outcome;
        outcome.infrastructure = true;
        outcome.reason =
            t->ranks.size() > 1
                ? absl::StrCat("worker lost (no heartbeat for ", silent, ")")
                : absl::StrCat("worker ", lost.worker_id, " lost (no heartbeat for ", silent, ")");
        OnRankOutcomeLocked(job->second.get(), t, lost_rank, outcome, TrialMetrics(), out);
      }
    }
  }
}

}  // namespace autoaccel
