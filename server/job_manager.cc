#include "server/job_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <random>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/json_log.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "search/cost_model.h"
#include "server/job_messages.h"
#include "server/job_outcome.h"
#include "server/job_resume.h"
#include "server/job_view.h"
#include "server/launcher_job.h"
#include "server/measurement_trust.h"
#include "server/rank_request.h"
#include "server/request_limits.h"
#include "server/settle.h"
#include "server/warm_start.h"

namespace autoaccel {

JobManager::JobManager(Store* store, TrialExecutor* executor, const Clock* clock,
                       JobManagerOptions options)
    : store_(store),
      executor_(executor),
      clock_(clock),
      options_(options),
      pool_(clock),
      archive_(store),
      earlier_trials_(store, clock) {
  store_->SetWriteTimer([this](absl::Duration took) { metrics_.StoreWrite(took); });
}

JobManager::Hold::Hold(JobManager* manager, Outbox* out) : manager_(manager), out_(out) {
  manager_->mu_.Lock();
}

JobManager::Hold::~Hold() {
  out_->writes = manager_->writer_.Take();
  manager_->mu_.Unlock();
}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(Store* store,
                                                               TrialExecutor* executor,
                                                               const Clock* clock,
                                                               JobManagerOptions options) {
  std::unique_ptr<JobManager> m(new JobManager(store, executor, clock, options));
  ASSIGN_OR_RETURN(m->model_files_,
                   ModelFileStore::Open(options.model_file_dir, options.model_file_limits));
  m->model_delivery_ = std::make_unique<ModelFileDelivery>(executor, m->model_files_.get());
  m->admission_ = std::make_unique<JobAdmission>(store, &m->pool_, m->model_files_.get(),
                                                 &m->earlier_trials_, clock, options.tune_defaults);
  RETURN_IF_ERROR(m->ResumeUnfinished());
  return m;
}

absl::Status JobManager::ResumeUnfinished() {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<JobRun>> jobs,
                   LoadUnfinishedJobs(ResumeSources{.store = store_,
                                                    .model_files = model_files_.get(),
                                                    .archive = &archive_,
                                                    .defaults = options_.tune_defaults,
                                                    .now = clock_->Now(),
                                                    .reattach_window = options_.reattach_window}));
  absl::MutexLock lock(&mu_);
  for (std::unique_ptr<JobRun>& job : jobs) {
    const std::string id = job->record.job_id;
    awaiting_reattach_ += job->running;  // every trial it runs awaits its workers
    user_jobs_.Count(job->record.owner);
    active_order_.push_back(id);
    active_.emplace(id, std::move(job));
  }
  return absl::OkStatus();
}

JobManager::~JobManager() {
  Stop();
  store_->SetWriteTimer(nullptr);
}

void JobManager::Start() {
  absl::MutexLock thread_lock(&thread_mu_);
  if (thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  planner_.Start();
  thread_ = std::thread([this] { Run(); });
}

void JobManager::Stop() {
  {
    absl::MutexLock thread_lock(&thread_mu_);
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    inbox_.Wake();
    if (thread_.joinable()) thread_.join();
  }
  planner_.Stop();
}

void JobManager::Shutdown() {
  Outbox out;
  {
    Hold hold(this, &out);
    shutting_down_ = true;
    SayStoppedLocked();
  }
  SendAll(std::move(out));
}

void JobManager::SayStoppedLocked() {
  for (const auto& [id, job] : active_) {
    job->record.status_message =
        "the coordinator shut down; the job goes on when it starts again on this database";
    PersistJobLocked(job.get());
  }
}

int JobManager::CutRunning() {
  Outbox out;
  int cut = 0;
  {
    Hold hold(this, &out);
    ApplyAnswersLocked(SIZE_MAX, &out);  // those that came are recorded, not cut
    for (const auto& [id, job] : active_) {
      for (const auto& t : job->trials) {
        if (t->record.status != TrialStatus::kRunning) continue;
        ++cut;
        StopAwaitingLocked(t.get());  // one taken up after a restart, not attached yet
        CancelRanks(*t, &out);
        RankOutcome outcome;
        outcome.infrastructure = true;
        outcome.reason = "cut by the coordinator's shutdown";
        t->infrastructure_failure = outcome;
        RetryOrGiveUpLocked(job.get(), t.get(), &out);  // its answers are ignored from now
      }
    }
    SayStoppedLocked();  // over what the answers during the drain said
  }
  SendAll(std::move(out));
  return cut;
}

bool JobManager::Drain(absl::Duration timeout) {
  // The scheduler may be stopped: the answers left in the inbox are applied
  // here.
  const absl::Time end = absl::Now() + timeout;
  while (true) {
    Outbox out;
    bool drained = false;
    {
      Hold hold(this, &out);
      ApplyAnswersLocked(SIZE_MAX, &out);
      drained = rpcs_in_flight_ == 0;
    }
    SendAll(std::move(out));
    if (drained) return true;
    if (absl::Now() >= end) return false;
    inbox_.WaitForAnswer(std::min(end, absl::Now() + absl::Milliseconds(100)));
  }
}

void JobManager::Run() {
  while (true) {
    Tick();
    absl::Duration wait = options_.tick_interval;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      // Wake at the next tick or the earliest deadline, whichever comes
      // first, so a job ends at its time limit rather than up to a tick later.
      const absl::Time now = clock_->Now();
      for (const auto& [id, job] : active_) wait = std::min(wait, job->record.deadline - now);
    }
    inbox_.WaitForWake(absl::Now() + std::max(wait, absl::ZeroDuration()));
  }
}

void JobManager::Tick() {
  // The answers waiting now first (answers coming faster than they are
  // applied do not keep the tick from dispatching), a batch per hold of the
  // lock, so that RPC handlers waiting for it (GetJob, SubmitJob) get it
  // between batches.
  for (size_t left = inbox_.pending(); left > 0;) {
    const size_t batch = std::min(left, kAnswersPerHold);
    left -= batch;
    Outbox out;
    {
      Hold hold(this, &out);
      ApplyAnswersLocked(batch, &out);
    }
    SendAll(std::move(out));
  }
  // Then the dispatches, a batch per hold of the lock, each batch sent
  // before the next is placed.
  for (bool capped = true; capped;) {
    Outbox out;
    {
      Hold hold(this, &out);
      capped = TickLocked(kDispatchesPerHold, &out);
    }
    if (!out.plans.empty()) {
      // Planned on the planner's thread once started (InstallSearch wakes
      // the scheduler); otherwise here, and the next round dispatches the
      // jobs planned.
      if (!planner_.running()) capped = true;
      for (SearchPlan& plan : out.plans) planner_.Enqueue(std::move(plan));
      out.plans.clear();
    }
    SendAll(std::move(out));
  }
}

void JobManager::SendAll(Outbox out) {
  writer_.Write(std::move(out.writes));  // before any worker hears of it
  for (Cancel& c : out.cancels) executor_->CancelTrial(c.to, c.request);
  for (const std::string& worker : out.distrusted) {
    absl::StatusOr<std::vector<std::string>> withdrawn =
        store_->WithdrawAnswersMeasuredOnlyOn(worker);
    if (!withdrawn.ok()) {
      spdlog::error("withdrawing the answers distrusted worker {} measured alone failed: {}",
                    worker, withdrawn.status().ToString());
    } else if (!withdrawn->empty()) {
      spdlog::warn("withdrew {} stored answer(s) measured on distrusted worker {} alone: {}",
                   withdrawn->size(), worker, absl::StrJoin(*withdrawn, ", "));
    }
  }
  if (!out.dispatches.empty()) {
    absl::MutexLock lock(&mu_);
    rpcs_in_flight_ += static_cast<int>(out.dispatches.size());
  }
  for (Dispatch& d : out.dispatches) {
    std::string job_id = d.job_id, trial_id = d.trial_id;
    const int attempt = d.attempt, rank = d.rank;
    TrialExecutor::Done done = [this, job_id, trial_id, attempt, rank](absl::Status s,
                                                                       v1::RunTrialResponse r) {
      OnRankDone(job_id, trial_id, attempt, rank, std::move(s), std::move(r));
    };
    if (d.model_file) {
      model_delivery_->RunTrial(d.to, d.request, *d.model_file, d.rpc_timeout, std::move(done));
    } else {
      executor_->RunTrial(d.to, d.request, d.rpc_timeout, std::move(done));
    }
  }
}

absl::StatusOr<v1::Job> JobManager::SubmitJob(v1::TuneRequest request, const std::string& owner) {
  ASSIGN_OR_RETURN(AdmittedJob admitted, admission_->Admit(std::move(request), owner));
  std::unique_ptr<JobRun> job = std::move(admitted.job);
  // A torchscript job's file is deleted again if the job is not created.
  absl::Cleanup forget_file = [&] {
    if (job->spec.model_file) model_files_->Remove(job->spec.model_file->job_id);
  };
  // Counted from here (before its record is written, without the lock) to
  // its end; a job the database answered is never unfinished.
  const bool counted = !admitted.answered;
  if (counted) RETURN_IF_ERROR(user_jobs_.Admit(owner));
  absl::Cleanup uncount = [&] {
    if (counted) user_jobs_.Release(owner);
  };
  RETURN_IF_ERROR(admission_->Create(job.get(), admitted.answered));
  std::move(forget_file).Cancel();
  const JobRecord& rec = job->record;
  if (admitted.answered) {
    // Finished as it was created: never active, read back from the store.
    metrics_.JobFinished(rec.state);
    return JobRecordToProto(rec, {}, rec.created_at);
  }
  std::move(uncount).Cancel();
  job->version = 1;
  // Not yet shared: its view needs no lock.
  const JobSnapshot snapshot{rec, {}, job->spec.request};
  {
    absl::MutexLock lock(&mu_);
    const std::string id = rec.job_id;  // `rec` moves with the job
    active_order_.push_back(id);
    active_.emplace(id, std::move(job));
    inbox_.Wake();
  }
  return Render(snapshot);
}

absl::StatusOr<v1::Job> JobManager::CancelJob(const std::string& job_id) {
  Outbox out;
  {
    Hold hold(this, &out);
    auto it = active_.find(job_id);
    if (it != active_.end()) {
      FinishJobLocked(it->second.get(), JobState::kCancelled, "cancelled by the user", &out);
    }
  }
  SendAll(std::move(out));
  return GetJob(job_id);
}

void JobManager::QueueRankCallsLocked(const JobRun& job, const TrialRun& trial, bool attach_only,
                                      Outbox* out) const {
  const absl::Duration timeout = std::min(
      job.spec.trial_timeout, job.record.deadline - clock_->Now() + options_.deadline_slack);
  std::vector<v1::RunTrialRequest> requests = RankRequests(job.spec, trial, timeout);
  for (size_t i = 0; i < trial.ranks.size(); ++i) {
    Dispatch d;
    d.to = trial.ranks[i].placed.endpoint();
    d.request = std::move(requests[i]);
    d.request.set_attach_only(attach_only);
    d.rpc_timeout = timeout + options_.rpc_grace;
    d.job_id = job.record.job_id;
    d.trial_id = trial.record.trial_id;
    d.attempt = trial.record.attempt;
    d.rank = static_cast<int>(i);
    d.model_file = job.spec.model_file;
    out->dispatches.push_back(std::move(d));
  }
}

bool JobManager::TickLocked(int max_dispatches, Outbox* out) {
  TakeWriteFailuresLocked();
  FailRanksOfLostWorkersLocked(out);
  tick_memo_ = TickMemo();
  tick_memo_.active = true;
  const absl::Time now = clock_->Now();
  for (const std::string& id : std::vector<std::string>(active_order_)) {
    if (awaiting_reattach_ == 0) break;
    JobRun* job = active_[id].get();
    for (const auto& t : job->trials) {
      if (t->awaiting_reattach && now >= t->reattach_until) {
        GiveUpReattachLocked(job, t.get(), "its workers did not report it in time", out);
      }
    }
  }
  std::vector<JobRun*> runnable;
  for (const std::string& id : std::vector<std::string>(active_order_)) {
    JobRun* job = active_[id].get();
    if (AdvanceJobLocked(job, out)) runnable.push_back(job);
  }
  // The pool is shared: each free gang goes to the runnable job with the
  // fewest trials in flight (the earlier job on a tie), so jobs submitted
  // together all make progress instead of the first taking every device.
  // A heap of (trials in flight, place in the order): a job that cannot
  // dispatch leaves it, one that did goes back with one more in flight.
  using Turn = std::pair<int, size_t>;
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> turns;
  for (size_t i = 0; i < runnable.size(); ++i) turns.emplace(runnable[i]->running, i);
  int dispatched = 0;
  while (!turns.empty() && dispatched < max_dispatches) {
    const size_t i = turns.top().second;
    turns.pop();
    if (DispatchOneLocked(runnable[i], out)) {
      ++dispatched;
      turns.emplace(runnable[i]->running, i);
    }
  }
  tick_memo_ = TickMemo();
  return !turns.empty();
}

bool JobManager::AdvanceJobLocked(JobRun* job, Outbox* out) {
  const LogContext context(job->record.job_id);
  if (!job->store_error.ok()) {
    FinishJobLocked(job, JobState::kFailed,
                    absl::StrCat("the database could not be written, so the job's results "
                                 "could not be kept (",
                                 job->store_error.message(), ")"),
                    out);
    return false;
  }
  if (clock_->Now() >= job->record.deadline) {
    // A job that never got its devices says why nothing ran.
    FinishJobLocked(job, JobState::kSucceeded,
                    job->record.state == JobState::kWaitingForWorkers
                        ? absl::StrCat(kTimeLimitReached, " while ", job->record.status_message)
                        : std::string(kTimeLimitReached),
                    out);
    return false;
  }
  if (!job->broken.empty()) {
    FinishJobLocked(job, JobState::kFailed, BrokenJobMessage(*job), out);
    return false;
  }
  // A search stopped only for the time its repeats need goes on when,
  // with them done, trials have become quick enough (the first ones paid
  // for compiling what later ones find in a cache) to leave room for more.
  if (job->searcher && job->search_ended == kSearchStoppedForRepeats &&
      job->confirmations.empty() && job->running == 0 && job->retries.empty() &&
      !job->searcher->Finished() && WhySearchEnded(*job) == kSearchStoppedForRepeats &&
      !SearchTimeUpLocked(*job)) {
    job->search_ended.clear();
    job->record.status_message = SearchResumedMessage(RecentTrialSeconds(*job));
    spdlog::info("job {}: {}", job->record.job_id, job->record.status_message);
    PersistJobLocked(job);
  }
  if (job->searcher &&
      (!job->search_ended.empty() || job->searcher->Finished() || SearchTimeUpLocked(*job)) &&
      job->running == 0 && job->retries.empty()) {
    if (job->search_ended.empty()) {
      // The search is over: before the job ends, its best few strategies
      // are measured again (dispatched below, interleaved) — a proxy job's
      // chosen by figures extrapolated with all it has measured.
      job->search_ended = WhySearchEnded(*job);
      for (TrialRun* t : ReextrapolateProxyTrials(job->searcher->cost_model(), job)) {
        PersistTrialLocked(job, t);
      }
      QueueConfirmationsLocked(job);
    }
    if (job->confirmations.empty() && !QueueRepeatsLocked(job) && !QueueFullSizeCheckLocked(job)) {
      FinishJobLocked(job, JobState::kSucceeded, job->search_ended, out);
      return false;
    }
  }
  const std::string& type = job->spec.device_type;
  const int world = job->spec.TrialRanks();
  const std::string& launcher = job->spec.request.launcher();
  const int pool = PoolDevicesLocked(*job);
  if (pool < world) {
    const std::string message =
        WaitingForWorkersMessage(type, launcher, world, pool, job->record.deadline);
    if (job->running == 0 && (job->record.state != JobState::kWaitingForWorkers ||
                              job->record.status_message != message)) {
      job->record.state = JobState::kWaitingForWorkers;
      job->record.status_message = message;
      PersistJobLocked(job);
    }
    return false;
  }
  if (!job->searcher) {
    if (!job->planning) {
      job->planning = true;
      SearchPlan plan;
      plan.job = active_[job->record.job_id];
      plan.device = pool_.DeviceSpecFor(type);
      plan.pool = pool;
      plan.confirm_reserve = options_.confirm_reserve;
      plan.clock = clock_;
      plan.resumed = ResumedTrials(*job);
      for (const auto& t : job->trials) t->told_searcher = IsTerminal(t->record.status);
      out->plans.push_back(std::move(plan));
    }
    return false;
  }
  if (job->record.state == JobState::kQueued || job->record.state == JobState::kWaitingForWorkers) {
    job->record.state = JobState::kRunning;
    if (job->record.started_at == absl::InfinitePast()) job->record.started_at = clock_->Now();
    job->record.status_message = "running trials";
    // A pool noisier than the job's tolerance cannot tell apart what differs
    // by less than its noise: said once, as the job starts.
    const auto [jitter, noisiest] = pool_.TimingJitter(type, launcher);
    if (jitter > ConfirmTolerance(job->spec.request)) {
      absl::StrAppend(&job->record.status_message, NoisyPoolNote(jitter, noisiest));
      spdlog::warn("job {}: {}", job->record.job_id, job->record.status_message);
    }
    PersistJobLocked(job);
  }
  return true;
}

bool JobManager::DispatchOneLocked(JobRun* job, Outbox* out) {
  const LogContext context(job->record.job_id);
  TrialRun* trial = nullptr;
  int attempt = 1;
  if (!job->retries.empty()) {  // a retry goes first: it was proposed first
    trial = job->retries.front();
    attempt = trial->record.attempt + 1;
  } else if (!job->confirmations.empty()) {
    trial = job->confirmations.front();
  } else if (!job->search_ended.empty() || SearchTimeUpLocked(*job)) {
    return false;
  }
  if (shutting_down_) return false;
  const std::string trial_id = trial != nullptr ? trial->record.trial_id : NextTrialId(*job);
  // A repeat runs on other workers than the measurement it repeats, where
  // the pool has them: one worker alone never confirms its own figures.
  std::optional<Gang> gang =
      PlaceLocked(*job, trial_id, attempt,
                  trial != nullptr ? WorkOf(job->spec, *trial).ranks : job->spec.TrialRanks(),
                  trial != nullptr ? WorkersToAvoid(*job, *trial) : std::set<std::string>());
  if (!gang) return false;
  if (!job->retries.empty()) {
    job->retries.pop_front();
    trial->record.attempt = attempt;
  } else if (!job->confirmations.empty()) {
    job->confirmations.pop_front();
  } else {
    std::optional<Proposal> proposal = job->searcher->Next();
    if (!proposal) {
      for (int r = 0; r < static_cast<int>(gang->ranks.size()); ++r) {
        pool_.Release(trial_id, attempt, r);
      }
      tick_memo_.unplaceable.clear();  // its devices are free again
      return false;
    }
    trial = NewTrial(job, proposal->strategy);
    trial->record.measured_steps = proposal->measured_steps;
    trial->record.predicted = proposal->predicted;
  }
  StartAttemptLocked(job, trial, std::move(*gang), out);
  return true;
}

void JobManager::StartAttemptLocked(JobRun* job, TrialRun* trial, Gang gang, Outbox* out) {
  const LogContext context(job->record.job_id, trial->record.trial_id);
  const TrialRecord& rec = trial->record;
  const std::string rendezvous =
      gang.master_port > 0
          ? absl::StrCat(" (rendezvous ", gang.master_host, ":", gang.master_port, ")")
          : "";
  const absl::Time now = clock_->Now();
  metrics_.TrialDispatched(trial->ready_since == absl::InfinitePast() ? absl::ZeroDuration()
                                                                      : now - trial->ready_since);
  trial->ready_since = absl::InfinitePast();
  BeginAttempt(job, trial, std::move(gang), now);
  QueueRankCallsLocked(*job, *trial, /*attach_only=*/false, out);
  spdlog::info("job {}: trial {}{} [{}] on {}{}", job->record.job_id, rec.index,
               rec.attempt > 1 ? absl::StrCat(" attempt ", rec.attempt) : "", rec.strategy_text,
               rec.worker_id, rendezvous);
  PersistTrialLocked(job, trial);
}

void JobManager::InstallSearch(PlannedSearch planned) {
  Outbox out;
  {
    Hold hold(this, &out);
    JobRun* job = planned.job.get();
    auto it = active_.find(job->record.job_id);
    if (it == active_.end() || it->second != planned.job) return;  // it ended meanwhile
    job->planning = false;
    inbox_.Wake();
    if (!planned.searcher.ok()) {
      FinishJobLocked(job, JobState::kFailed, std::string(planned.searcher.status().message()),
                      &out);
    } else {
      job->searcher = *std::move(planned.searcher);
      InstallSearchLocked(job, planned);
    }
  }
  SendAll(std::move(out));
}

void JobManager::InstallSearchLocked(JobRun* job, const PlannedSearch& planned) {
  const LogContext context(job->record.job_id);
  job->spec.space.clear();
  job->spec.space.shrink_to_fit();
  job->earlier.reset();
  // Trials that ended while the search was planned (taken up after a
  // restart) are told now.
  for (const auto& t : job->trials) {
    if (t->told_searcher || !t->record.confirms.empty() ||
        t->record.status == TrialStatus::kPruned || !IsTerminal(t->record.status)) {
      continue;
    }
    job->searcher->Report(ScoredOf(*t));
    t->told_searcher = true;
  }
  job->record.trials_total = planned.candidates;
  job->record.algorithm = absl::StrCat(
      planned.description.empty() ? job->searcher->Describe() : planned.description,
      WarmStartNote(planned.warmed, job->spec.device_type),
      job->spec.proxy_note.empty() ? "" : absl::StrCat("; ", job->spec.proxy_note),
      planned.resumed > 0
          ? absl::StrCat("; took up ", planned.resumed, " recorded trial(s) after a restart")
          : "");
  spdlog::info("job {}: {}", job->record.job_id, job->record.algorithm);
  // Seen by readers now; written with the job's next record (a new job's:
  // the tick this wakes, which starts it running in the same write as its
  // first dispatches; a resumed one's: its next result or its end). A crash
  // before loses only what planning again after the restart recomputes.
  ++job->version;
  RecordPrunedLocked(job);
}

void JobManager::RecordPrunedLocked(JobRun* job) {
  const std::vector<TrialRecord> records =
      AddPrunedTrials(job, job->searcher->TakePruned(), clock_->Now());
  if (records.empty()) return;
  metrics_.TrialFinished(TrialStatus::kPruned, false, static_cast<int>(records.size()));
  for (const TrialRecord& record : records) writer_.Keep(record);
  spdlog::info("job {}: pruned {} candidate(s), e.g. {}: {}", job->record.job_id, records.size(),
               records.front().strategy_text, records.front().reason);
}

int JobManager::PoolDevicesLocked(const JobRun& job) const {
  const std::pair<std::string, std::string> key(job.spec.device_type, job.spec.request.launcher());
  if (tick_memo_.active) {
    if (auto it = tick_memo_.devices.find(key); it != tick_memo_.devices.end()) return it->second;
  }
  const int devices = pool_.CountDevices(key.first, key.second);
  if (tick_memo_.active) tick_memo_.devices.emplace(key, devices);
  return devices;
}

std::optional<Gang> JobManager::PlaceLocked(const JobRun& job, const std::string& trial_id,
                                            int attempt, int ranks,
                                            const std::set<std::string>& avoid) {
  const TickMemo::GangShape shape{job.spec.device_type, job.spec.request.launcher(), ranks};
  if (tick_memo_.active && tick_memo_.unplaceable.count(shape) > 0) return std::nullopt;
  std::optional<Gang> gang =
      pool_.Place(shape.type, shape.world, trial_id, attempt, shape.launcher, avoid);
  // Avoiding no worker, no gang of this shape fits until devices are freed.
  if (!gang && avoid.empty() && tick_memo_.active) tick_memo_.unplaceable.insert(shape);
  return gang;
}

bool JobManager::SearchTimeUpLocked(const JobRun& job) const {
  if (tick_memo_.active) {
    if (auto it = tick_memo_.search_time_up.find(&job); it != tick_memo_.search_time_up.end()) {
      return it->second;
    }
  }
  const bool up = SearchTimeUp(job, clock_->Now(), PoolDevicesLocked(job) / job.spec.TrialRanks(),
                               options_.confirm_top);
  if (tick_memo_.active) tick_memo_.search_time_up.emplace(&job, up);
  return up;
}

void JobManager::PersistJobLocked(JobRun* job) {
  ++job->version;
  writer_.Keep(job->record);
}

void JobManager::PersistTrialLocked(JobRun* job, TrialRun* trial) {
  trial->version = ++job->version;
  writer_.Keep(trial->record);
}

void JobManager::TakeWriteFailuresLocked() {
  for (auto& [job_id, status] : writer_.TakeFailures()) {
    auto it = active_.find(job_id);
    if (it != active_.end() && it->second->store_error.ok()) it->second->store_error = status;
  }
}

}  // namespace autoaccel
