// JobManager's side of the answers (server/job_manager.h): a rank's answer
// applied to its trial's attempt (server/job_run.h ApplyRankAnswer), the
// attempt retried or given up, the trial ended (the searcher told, the
// peers' figures checked, the answer so far updated), the best few queued
// for confirmation and repeats until the answer settles
// (server/settle.h), and the job ended with its outcome
// (server/job_outcome.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_log.h"
#include "proto/convert.h"
#include "server/job_manager.h"
#include "server/job_messages.h"
#include "server/job_outcome.h"
#include "server/measurement_trust.h"
#include "server/settle.h"

namespace autoaccel {

void JobManager::CancelRanks(const TrialRun& trial, Outbox* out) {
  std::set<std::string> told;
  for (const Rank& rank : trial.ranks) {
    if (rank.finished || rank.placed.address.empty() || !told.insert(rank.placed.address).second) {
      continue;  // answered, or not placed (awaiting re-attachment)
    }
    Cancel c;
    c.to = rank.placed.endpoint();
    c.request.set_trial_id(trial.record.trial_id);
    c.request.set_attempt(trial.record.attempt);
    out->cancels.push_back(std::move(c));
  }
}

void JobManager::OnRankDone(const std::string& job_id, const std::string& trial_id, int attempt,
                            int rank_index, absl::Status status, v1::RunTrialResponse response) {
  inbox_.Push(
      RankAnswer{job_id, trial_id, attempt, rank_index, std::move(status), std::move(response)});
  // Applied here when the lock is free (at once, in the order answers came);
  // otherwise its holder or the scheduler, just woken, applies it.
  if (!mu_.TryLock()) return;
  Outbox out;
  ApplyAnswersLocked(kAnswersPerHold, &out);
  out.writes = writer_.Take();  // as Hold does
  mu_.Unlock();
  SendAll(std::move(out));
}

void JobManager::ApplyAnswersLocked(size_t max, Outbox* out) {
  std::vector<RankAnswer> answers = inbox_.Take(max);
  for (RankAnswer& answer : answers) ApplyAnswerLocked(std::move(answer), out);
  if (!answers.empty()) inbox_.Wake();  // their devices may take the next trials
}

void JobManager::ApplyAnswerLocked(RankAnswer answer, Outbox* out) {
  const LogContext context(answer.job_id, answer.trial_id, answer.rank);
  const int rank_index = answer.rank;
  const absl::Status& status = answer.status;
  // Whatever became of the trial (or its job), this rank's device is free.
  pool_.Release(answer.trial_id, answer.attempt, rank_index);
  --rpcs_in_flight_;
  auto job_it = active_.find(answer.job_id);
  TrialRun* trial = job_it != active_.end() ? FindTrial(*job_it->second, answer.trial_id) : nullptr;
  // An answer of an earlier attempt changes nothing but the holds.
  if (trial == nullptr || trial->record.attempt != answer.attempt ||
      trial->record.status != TrialStatus::kRunning || rank_index < 0 ||
      rank_index >= static_cast<int>(trial->ranks.size()) || trial->ranks[rank_index].finished) {
    return;
  }
  Rank& rank = trial->ranks[rank_index];
  rank.finished = true;
  --trial->ranks_pending;
  // A worker that did not answer at all gets no new trials until it
  // heartbeats again, rather than trials that fail the same way.
  if (status.code() == absl::StatusCode::kUnavailable &&
      pool_.MarkUnreachable(rank.placed.worker_id)) {
    spdlog::warn("worker {} unreachable ({}); no new trials until it heartbeats",
                 rank.placed.worker_id, std::string(status.message()));
  }
  const RankOutcome outcome = RankOutcomeOf(status, answer.response);
  if (outcome.status != TrialStatus::kCancelled && outcome.status != TrialStatus::kTimeout) {
    pool_.RecordRankAnswer(rank.placed.worker_id, outcome.infrastructure, outcome.reason,
                           options_.quarantine_after, options_.quarantine_for);
  }
  JobRun* job = job_it->second.get();
  if (clock_->Now() >= job->record.deadline) {
    // The answer came after the time limit: the trial was still running
    // then, so the job ends now, as the scheduler would have ended it,
    // and the trial is recorded CANCELLED. `job` and `trial` are gone.
    FinishJobLocked(job, JobState::kSucceeded, kTimeLimitReached, out);
  } else {
    OnRankOutcomeLocked(job, trial, rank_index, outcome, FromProto(answer.response.metrics()), out);
  }
}

void JobManager::OnRankOutcomeLocked(JobRun* job, TrialRun* trial, int rank_index,
                                     RankOutcome outcome, const TrialMetrics& metrics,
                                     Outbox* out) {
  // The limits judge the gang's figures once its last rank answered.
  const AttemptVerdict verdict =
      ApplyRankAnswer(trial, rank_index, std::move(outcome), metrics,
                      trial->ranks_pending == 0 ? MeasurementLimitsOf(*job, *trial, pool_)
                                                : std::vector<MeasurementLimits>());
  if (verdict.cancel_others) CancelRanks(*trial, out);
  if (!verdict.distrusted_worker.empty()) {
    pool_.Distrust(verdict.distrusted_worker, verdict.reason, options_.distrust_for);
    out->distrusted.push_back(verdict.distrusted_worker);
  }
  switch (verdict.kind) {
    case AttemptVerdict::kWait:
      return;
    case AttemptVerdict::kRetry:
      RetryOrGiveUpLocked(job, trial, out);
      return;
    case AttemptVerdict::kEnd:
      EndTrialLocked(job, trial, verdict.status, verdict.reason, verdict.metrics, out);
      return;
  }
}

void JobManager::RetryOrGiveUpLocked(JobRun* job, TrialRun* trial, Outbox* out) {
  const LogContext context(job->record.job_id, trial->record.trial_id);
  const std::string why = trial->infrastructure_failure->reason;
  metrics_.AttemptFailedOutsideStrategy();
  if (trial->master_port > 0) {
    // The port may be what failed (another process bound it): the next
    // attempt, and every other trial, gets another one for a while.
    pool_.QuarantinePort(trial->master_host, trial->master_port,
                         clock_->Now() + options_.port_quarantine);
  }
  if (QueueRetry(job, trial, options_.max_attempts, clock_->Now())) {
    spdlog::warn("job {}: trial {} attempt {} failed outside the strategy: {}; retrying",
                 job->record.job_id, trial->record.index, trial->record.attempt, why);
    PersistTrialLocked(job, trial);
    return;
  }
  EndTrialLocked(job, trial, TrialStatus::kFailed, GivenUpReason(trial->record.attempt, why),
                 TrialMetrics(), out);
}

void JobManager::EndTrialLocked(JobRun* job, TrialRun* trial, TrialStatus status,
                                const std::string& reason, const TrialMetrics& metrics,
                                Outbox* out) {
  const LogContext context(job->record.job_id, trial->record.trial_id);
  StopAwaitingLocked(trial);
  CloseTrial(job, trial, status, reason, metrics, clock_->Now());
  const TrialRecord& rec = trial->record;
  metrics_.TrialFinished(status, rec.infrastructure);
  if (rec.started_at != absl::InfinitePast() && rec.finished_at >= rec.started_at) {
    metrics_.TrialRan(rec.finished_at - rec.started_at);
  }
  // One CancelTrial per worker stops all of the trial's ranks there.
  if (status != TrialStatus::kSucceeded) CancelRanks(*trial, out);
  // The searcher's proposal (it never sees confirmations); a resumed job
  // ending before its searcher was created again has none to tell.
  if (rec.confirms.empty() && job->searcher) {
    // A trial lost to infrastructure failures measured nothing: the searcher
    // hears of it as cancelled, never as the strategy failing.
    job->searcher->Report(ScoredOf(*trial));
    trial->told_searcher = true;
    RecordPrunedLocked(job);
  }
  // A proxy trial answers with the full run's figures, extrapolated by the
  // model that has just learnt from it.
  if (status == TrialStatus::kSucceeded && job->spec.proxy && !rec.full_size) {
    ExtrapolateProxyTrial(job->searcher ? job->searcher->cost_model() : nullptr, trial);
  }
  if (rec.confirms.empty() && status == TrialStatus::kFailed && job->broken.empty()) {
    job->broken = SameFailureEveryTime(*job);
  }
  if (std::optional<PeerDistrust> peer = PeerDisagreement(job, trial, pool_)) {
    // One of two workers measured the same strategy beyond reason apart:
    // the faster claim is withdrawn and its worker distrusted.
    pool_.Distrust(peer->worker_id, peer->reason, options_.distrust_for);
    out->distrusted.push_back(peer->worker_id);
    peer->trial->record.status = TrialStatus::kFailed;
    peer->trial->record.reason = absl::StrCat("distrusted: ", peer->reason);
    job->answer_shortcut.Forget();
    if (peer->trial != trial) PersistTrialLocked(job, peer->trial);
  }
  if (rec.status == TrialStatus::kSucceeded) {
    UpdateAnswerSoFar(job, rec);
    job->record.status_message =
        absl::StrFormat("%d trial(s) done", static_cast<int>(job->trials.size()) - job->running);
    PersistJobLocked(job);
  }
  spdlog::info("job {}: trial {} {} {}{}", job->record.job_id, rec.index,
               std::string(TrialStatusName(rec.status)),
               rec.status == TrialStatus::kSucceeded
                   ? absl::StrFormat("%.0f tokens/s%s", rec.metrics.tokens_per_second,
                                     rec.proxy ? " (extrapolated from its proxy)" : "")
                   : "",
               rec.reason);
  PersistTrialLocked(job, trial);
}

void JobManager::FinishJobLocked(JobRun* job, JobState state, const std::string& message,
                                 Outbox* out) {
  const LogContext context(job->record.job_id);
  const std::string reason =
      state == JobState::kCancelled ? message : absl::StrCat("job ended: ", message);
  for (auto& t : job->trials) {
    if (!IsTerminal(t->record.status)) {
      EndTrialLocked(job, t.get(), TrialStatus::kCancelled, reason, TrialMetrics(), out);
    }
  }
  JobRecord& rec = job->record;
  rec.finished_at = clock_->Now();
  std::vector<TrialRecord> records = TrialRecords(*job);
  JobOutcome outcome = DecideJobOutcome(
      rec, job->spec, records, state, message, rec.finished_at, store_->GetStrategy(rec.signature),
      pool_.CountWorkers(job->spec.device_type, job->spec.request.launcher()));
  rec.state = outcome.state;
  rec.status_message = outcome.status_message;
  rec.best_trial_id = outcome.best_trial_id;
  // Answered from the archive's memory until the writer writes it, after
  // the hold's writes of its trials. After a failed write, what the store
  // holds of the trials may be stale: they are all written again with the
  // job. The store keeps the answer only if it beats the signature's
  // (ReplacesStoredAnswer, in the same transaction).
  archive_.Finish(rec, std::move(records), outcome.answer);
  writer_.KeepFinished(rec.job_id, !job->store_error.ok());
  if (job->spec.model_file) model_files_->Remove(rec.job_id);
  earlier_trials_.Invalidate();  // its trials may warm the next job
  spdlog::info("job {}: {} — {}", rec.job_id, std::string(JobStateName(rec.state)),
               rec.status_message);
  metrics_.JobFinished(rec.state);
  active_order_.erase(std::find(active_order_.begin(), active_order_.end(), rec.job_id));
  user_jobs_.Release(rec.owner);
  active_.erase(rec.job_id);  // `job` is gone after this line
}

void JobManager::QueueConfirmationsLocked(JobRun* job) {
  const LogContext context(job->record.job_id);
  const std::vector<TrialRun*> confirmations = AddConfirmations(job, options_.confirm_top);
  if (confirmations.empty()) return;
  std::vector<std::string> names;
  for (TrialRun* confirm : confirmations) {
    confirm->ready_since = clock_->Now();
    names.push_back(absl::StrCat(FindTrial(*job, confirm->record.confirms)->record.index));
    PersistTrialLocked(job, confirm);
  }
  job->record.status_message = ConfirmingMessage(job->search_ended, names);
  spdlog::info("job {}: {}", job->record.job_id, job->record.status_message);
  PersistJobLocked(job);
}

bool JobManager::QueueFullSizeCheckLocked(JobRun* job) {
  if (!job->spec.proxy || PoolDevicesLocked(*job) < job->spec.world_size) return false;
  TrialRun* check = AddFullSizeCheck(job);
  if (check == nullptr) return false;
  const LogContext context(job->record.job_id);
  check->ready_since = clock_->Now();
  PersistTrialLocked(job, check);
  job->record.status_message =
      absl::StrCat(job->search_ended, "; measuring the answer at full size (", job->spec.world_size,
                   " ranks) to check its proxy's extrapolation");
  spdlog::info("job {}: {}", job->record.job_id, job->record.status_message);
  PersistJobLocked(job);
  return true;
}

bool JobManager::QueueRepeatsLocked(JobRun* job) {
  if (options_.confirm_top <= 0) return false;
  const std::vector<TrialRecord> records = TrialRecords(*job);  // the standings point into it
  const Standings standings = Settle(records, 0, ConfirmTolerance(job->spec.request));
  if (standings.measure_again.empty()) return false;
  const int gangs = PoolDevicesLocked(*job) / job->spec.TrialRanks();
  if (!RepeatRoundFits(*job, clock_->Now(), gangs,
                       static_cast<int>(standings.measure_again.size()))) {
    return false;
  }
  const std::vector<TrialRun*> repeats = AddRepeats(job, standings.measure_again);
  if (repeats.empty()) return false;
  const LogContext context(job->record.job_id);
  std::vector<std::string> names;
  for (TrialRun* repeat : repeats) {
    repeat->ready_since = clock_->Now();
    names.push_back(absl::StrCat(FindTrial(*job, repeat->record.confirms)->record.index));
    PersistTrialLocked(job, repeat);
  }
  job->record.status_message = NotSettledMessage(job->search_ended, standings, names);
  spdlog::info("job {}: {}", job->record.job_id, job->record.status_message);
  PersistJobLocked(job);
  return true;
}

}  // namespace autoaccel
