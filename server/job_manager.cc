#include "server/job_manager.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/trial_io.h"
#include "proto/convert.h"
#include "search/cost_model.h"
#include "search/partial_strategy.h"
#include "search/space.h"
#include "server/signature.h"
#include "server/tune_request.h"

namespace autoaccel {
namespace {

absl::Time FromUnixSeconds(double s) {
  return s == 0 ? absl::InfinitePast() : absl::UnixEpoch() + absl::Seconds(s);
}

// How a job that reached its time limit ends (its running trials are
// cancelled with "job ended: " and this).
constexpr char kTimeLimitReached[] = "time limit reached";

// Answers stay far below gRPC's 4 MB whatever the job's size.
constexpr int kMaxJobsListed = 500;
constexpr int kDefaultTrialsPerPage = 1000;
constexpr int kMaxTrialsPerPage = 5000;

// "rank 1 on worker w2: " for a rank of a multi-rank trial, "" for a single
// rank (its trial's reason needs no such prefix).
std::string RankPrefix(size_t world_size, int rank, const std::string& worker_id) {
  return world_size > 1 ? absl::StrCat("rank ", rank, " on worker ", worker_id, ": ") : "";
}

// Who holds a rendezvous port: one attempt of one trial.
std::string PortHolder(const std::string& trial_id, int attempt) {
  return absl::StrCat(trial_id, "/a", attempt);
}

}  // namespace

std::string HostOfAddress(const std::string& address) {
  absl::string_view a = address;
  if (absl::ConsumePrefix(&a, "[")) {  // "[v6]:port"
    return std::string(a.substr(0, a.find(']')));
  }
  const size_t colon = a.rfind(':');
  // No port, or a bare IPv6 address (more than one colon): nothing to strip.
  if (colon == absl::string_view::npos || a.find(':') != colon) return address;
  return std::string(a.substr(0, colon));
}

v1::Trial TrialToProto(const TrialRecord& r) {
  v1::Trial t;
  t.set_trial_id(r.trial_id);
  t.set_job_id(r.job_id);
  t.set_index(r.index);
  t.set_attempt(r.attempt);
  if (auto s = ParseStrategyText(r.strategy_text); s.ok()) *t.mutable_strategy() = ToProto(*s);
  t.set_strategy_json(r.strategy_json);
  t.set_status(std::string(TrialStatusName(r.status)));
  t.set_reason(r.reason);
  *t.mutable_metrics() = ToProto(r.metrics);
  for (absl::string_view w : absl::StrSplit(r.worker_id, ',', absl::SkipEmpty())) {
    t.add_worker_ids(std::string(w));
  }
  t.set_started_at(UnixSecondsOrZero(r.started_at));
  t.set_finished_at(UnixSecondsOrZero(r.finished_at));
  for (const std::string& f : r.failed_attempts) t.add_failed_attempts(f);
  t.set_infrastructure(r.infrastructure);
  t.set_confirms(r.confirms);
  return t;
}

InfrastructureSummary SummariseInfrastructure(const std::vector<TrialRecord>& trials) {
  InfrastructureSummary out;
  auto note = [&](const std::string& reason) {
    if (out.reasons.size() < 5 &&
        std::find(out.reasons.begin(), out.reasons.end(), reason) == out.reasons.end()) {
      out.reasons.push_back(reason);
    }
  };
  for (const TrialRecord& t : trials) {
    out.failures += static_cast<int>(t.failed_attempts.size());
    for (const std::string& f : t.failed_attempts) {
      // "attempt 2: why" -> "why": the same cause reads the same in every trial.
      absl::string_view why = f;
      if (size_t colon = why.find(": ");
          absl::StartsWith(why, "attempt ") && colon != absl::string_view::npos) {
        why.remove_prefix(colon + 2);
      }
      note(std::string(why));
    }
    if (t.infrastructure) ++out.trials_lost;
  }
  return out;
}

v1::Job JobRecordToProto(const JobRecord& r, const std::vector<TrialRecord>& trials) {
  v1::Job j;
  j.set_job_id(r.job_id);
  j.set_state(std::string(JobStateName(r.state)));
  j.set_status_message(r.status_message);
  (void)google::protobuf::util::JsonStringToMessage(r.request_json, j.mutable_request());
  j.set_signature(r.signature);
  j.set_created_at(UnixSecondsOrZero(r.created_at));
  j.set_started_at(UnixSecondsOrZero(r.started_at));
  j.set_finished_at(UnixSecondsOrZero(r.finished_at));
  j.set_deadline(UnixSecondsOrZero(r.deadline));
  j.set_trials_total(r.trials_total);
  j.set_algorithm(r.algorithm);
  int done = 0, running = 0, pruned = 0;
  std::map<std::string, v1::PrunedSummary> by_kind;
  for (const TrialRecord& t : trials) {
    if (IsTerminal(t.status)) ++done;
    if (t.status == TrialStatus::kPruned) {
      ++pruned;
      const std::string kind = t.reason.substr(0, t.reason.find(": "));
      v1::PrunedSummary& summary = by_kind[kind];
      if (summary.count() == 0) {
        summary.set_kind(kind);
        *summary.mutable_example() = TrialToProto(t);
      }
      summary.set_count(summary.count() + 1);
    }
    if (t.status == TrialStatus::kRunning) ++running;
    if (!r.best_trial_id.empty() && t.trial_id == r.best_trial_id) {
      *j.mutable_best() = TrialToProto(t);
    }
  }
  j.set_trials_done(done);
  j.set_trials_running(running);
  j.set_trials_pruned(pruned);
  std::vector<v1::PrunedSummary> summaries;
  for (auto& [kind, summary] : by_kind) summaries.push_back(std::move(summary));
  std::stable_sort(
      summaries.begin(), summaries.end(),
      [](const v1::PrunedSummary& a, const v1::PrunedSummary& b) { return a.count() > b.count(); });
  for (v1::PrunedSummary& summary : summaries) *j.add_pruned_summary() = std::move(summary);
  const InfrastructureSummary infra = SummariseInfrastructure(trials);
  j.set_infrastructure_failures(infra.failures);
  j.set_trials_lost(infra.trials_lost);
  for (const std::string& reason : infra.reasons) j.add_infrastructure_reasons(reason);
  j.set_partial_evidence(infra.trials_lost > 0);
  if (j.has_best()) {
    const Answer answer = ChooseAnswer(trials, 0);
    j.set_best_confirmed(answer.confirmed);
    j.set_best_spread(answer.spread);
    j.set_best_measurements(answer.measurements);
  }
  if (r.created_at != absl::InfinitePast()) {
    absl::Time end = r.finished_at != absl::InfinitePast() ? r.finished_at : absl::Now();
    j.set_elapsed_seconds(absl::ToDoubleSeconds(end - r.created_at));
  }
  return j;
}

JobManager::JobManager(Store* store, TrialExecutor* executor, const Clock* clock,
                       JobManagerOptions options)
    : store_(store), executor_(executor), clock_(clock), options_(options) {}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(Store* store,
                                                               TrialExecutor* executor,
                                                               const Clock* clock,
                                                               JobManagerOptions options) {
  std::unique_ptr<JobManager> m(new JobManager(store, executor, clock, options));
  // A job cannot be followed across a restart: its trials' RPCs died with the
  // old process. Close it honestly rather than leave it RUNNING forever.
  ASSIGN_OR_RETURN(std::vector<JobRecord> unfinished, store->ListUnfinishedJobs());
  for (JobRecord& job : unfinished) {
    ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store->ListTrials(job.job_id));
    std::vector<TrialRecord> changed;
    for (TrialRecord& t : trials) {
      if (IsTerminal(t.status)) continue;
      t.status = TrialStatus::kFailed;
      t.reason = "server restarted while the trial was running";
      t.finished_at = clock->Now();
      changed.push_back(t);
    }
    RETURN_IF_ERROR(store->UpsertTrials(changed));
    job.state = JobState::kFailed;
    job.status_message = "server restarted while the job was running";
    job.finished_at = clock->Now();
    RETURN_IF_ERROR(store->FinishJob(job, std::nullopt));
    spdlog::warn("job {} was left unfinished by an earlier server; marked FAILED", job.job_id);
  }
  return m;
}

JobManager::~JobManager() { Stop(); }

void JobManager::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void JobManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JobManager::Shutdown() {
  std::vector<Cancel> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& id : std::vector<std::string>(active_order_)) {
      FinishJobLocked(active_[id].get(), JobState::kCancelled, "server shut down", &cancels);
    }
  }
  SendAll({}, std::move(cancels));
}

bool JobManager::Drain(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                      [this] { return rpcs_in_flight_ == 0; });
}

void JobManager::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    std::vector<Dispatch> dispatches;
    std::vector<Cancel> cancels;
    TickLocked(&dispatches, &cancels);
    lock.unlock();
    SendAll(std::move(dispatches), std::move(cancels));
    lock.lock();
    if (stopping_) break;
    // Wake at the next tick or the earliest deadline, whichever comes first,
    // so a job ends at its time limit rather than up to a tick later.
    absl::Duration wait = options_.tick_interval;
    const absl::Time now = clock_->Now();
    for (const auto& [id, job] : active_) wait = std::min(wait, job->record.deadline - now);
    cv_.wait_for(lock, absl::ToChronoMicroseconds(std::max(wait, absl::ZeroDuration())));
  }
}

void JobManager::Tick() {
  std::vector<Dispatch> dispatches;
  std::vector<Cancel> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TickLocked(&dispatches, &cancels);
  }
  SendAll(std::move(dispatches), std::move(cancels));
}

void JobManager::SendAll(std::vector<Dispatch> dispatches, std::vector<Cancel> cancels) {
  for (Cancel& c : cancels) executor_->CancelTrial(c.address, c.request);
  if (!dispatches.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    rpcs_in_flight_ += static_cast<int>(dispatches.size());
  }
  for (Dispatch& d : dispatches) {
    std::string job_id = d.job_id, trial_id = d.trial_id;
    const int attempt = d.attempt, rank = d.rank;
    executor_->RunTrial(
        d.address, d.request, d.rpc_timeout,
        [this, job_id, trial_id, attempt, rank](absl::Status s, v1::RunTrialResponse r) {
          OnRankDone(job_id, trial_id, attempt, rank, std::move(s), std::move(r));
        });
  }
}

absl::StatusOr<v1::Job> JobManager::SubmitJob(const v1::TuneRequest& request) {
  TuneDefaults defaults;
  defaults.warmup_steps = options_.default_warmup_steps;
  defaults.measured_steps = options_.default_measured_steps;
  defaults.trial_timeout = options_.default_trial_timeout;
  defaults.min_measured_seconds = options_.default_min_measured_seconds;
  ASSIGN_OR_RETURN(ValidatedRequest valid, ValidateTuneRequest(request, defaults));
  const v1::TuneRequest& r = valid.request;
  std::lock_guard<std::mutex> lock(mu_);
  auto job = std::make_unique<JobRun>();
  job->request = r;
  // A torchscript file stays in memory for the trials, out of the database
  // and of every answer.
  if (!r.model().script().empty()) {
    job->script = std::make_shared<const std::string>(r.model().script());
    job->request.mutable_model()->clear_script();
  }
  job->model = valid.model;
  JobRecord& rec = job->record;
  rec.job_id = NewJobIdLocked();
  rec.state = JobState::kQueued;
  rec.status_message = "queued";
  rec.request_json = ProtoToJson(job->request);
  rec.signature = ComputeSignature(valid.model, r.seq_len(), r.global_batch_size(), r.world_size(),
                                   r.device_type());
  rec.created_at = clock_->Now();
  rec.deadline = rec.created_at + absl::Seconds(r.time_limit_seconds());
  rec.trials_total = static_cast<int>(valid.space.size());
  job->space = std::move(valid.space);
  job->algorithm = valid.algorithm;
  job->load = std::move(valid.load);
  if (job->load && !r.finetune()) rec.trials_total = 1;
  absl::Status created = store_->CreateJob(rec);
  for (int retry = 0; absl::IsAlreadyExists(created) && retry < 3; ++retry) {
    rec.job_id = NewJobIdLocked();
    created = store_->CreateJob(rec);
  }
  RETURN_IF_ERROR(created);
  job->version = 1;
  spdlog::info("job {}: submitted ({} {} layers, seq {}, batch {}, {} candidates, limit {}s)",
               rec.job_id, r.model().family(), job->model.n_layer, r.seq_len(),
               r.global_batch_size(), rec.trials_total, r.time_limit_seconds());
  v1::Job out = JobToProtoLocked(*job);
  active_order_.push_back(rec.job_id);
  active_.emplace(rec.job_id, std::move(job));
  cv_.notify_all();
  return out;
}

absl::StatusOr<v1::Job> JobManager::GetJob(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) return JobToProtoLocked(*it->second);
    auto unstored = unstored_.find(job_id);
    if (unstored != unstored_.end()) {
      return JobRecordToProto(unstored->second.record, unstored->second.trials);
    }
  }
  ASSIGN_OR_RETURN(JobRecord record, store_->GetJob(job_id));
  ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store_->ListTrials(job_id));
  return JobRecordToProto(record, trials);
}

absl::StatusOr<v1::JobEvent> JobManager::GetJobEvent(const std::string& job_id,
                                                     uint64_t since_version, bool include_pruned,
                                                     uint64_t* version) {
  const auto wanted = [include_pruned](const TrialRecord& t) {
    return include_pruned || t.status != TrialStatus::kPruned;
  };
  JobRecord record;
  std::vector<TrialRecord> trials;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) {
      v1::JobEvent event;
      *event.mutable_job() = JobToProtoLocked(*it->second);
      for (const auto& t : it->second->trials) {
        if (t->version > since_version && wanted(t->record)) {
          *event.add_trials() = TrialToProto(t->record);
        }
      }
      *version = it->second->version;
      return event;
    }
    auto unstored = unstored_.find(job_id);
    if (unstored != unstored_.end()) {
      record = unstored->second.record;
      trials = unstored->second.trials;
    }
  }
  if (record.job_id.empty()) {
    ASSIGN_OR_RETURN(record, store_->GetJob(job_id));
    ASSIGN_OR_RETURN(trials, store_->ListTrials(job_id));
  }
  v1::JobEvent event;
  *event.mutable_job() = JobRecordToProto(record, trials);
  // Finished: what changed since `since_version` is no longer known, so a
  // watcher that saw the job running gets every trial that ran again (the
  // pruned ones only if it asked and has not had them yet).
  for (const TrialRecord& t : trials) {
    if (t.status != TrialStatus::kPruned || (include_pruned && since_version == 0)) {
      *event.add_trials() = TrialToProto(t);
    }
  }
  *version = UINT64_MAX;  // finished: never changes again
  return event;
}

absl::StatusOr<v1::Job> JobManager::CancelJob(const std::string& job_id) {
  std::vector<Cancel> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) {
      FinishJobLocked(it->second.get(), JobState::kCancelled, "cancelled by the user", &cancels);
    }
  }
  SendAll({}, std::move(cancels));
  return GetJob(job_id);
}

absl::StatusOr<std::vector<v1::Job>> JobManager::ListJobs(int limit) {
  if (limit < 0) return absl::InvalidArgumentError("limit: must not be negative");
  ASSIGN_OR_RETURN(std::vector<JobRecord> records,
                   store_->ListJobs(limit == 0 ? 50 : std::min(limit, kMaxJobsListed)));
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
  if (request.page_size() < 0 || request.page_size() > kMaxTrialsPerPage) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: must be between 0 and ", kMaxTrialsPerPage, ", got ", request.page_size()));
  }
  const int page_size = request.page_size() == 0 ? kDefaultTrialsPerPage : request.page_size();
  // The token is the proposal index to continue from.
  int start = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &start) || start < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token: '", request.page_token(), "' is not one this server gave"));
  }
  std::vector<TrialRecord> trials;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(request.job_id());
    if (it != active_.end()) {
      for (const auto& t : it->second->trials) trials.push_back(t->record);
    }
    auto unstored = unstored_.find(request.job_id());
    if (unstored != unstored_.end()) trials = unstored->second.trials;
  }
  if (trials.empty()) {
    // A finished job: the store reads this page only (one more trial tells
    // whether another page follows).
    RETURN_IF_ERROR(store_->GetJob(request.job_id()).status());  // NOT_FOUND
    ASSIGN_OR_RETURN(trials, store_->ListTrialsFrom(request.job_id(), start, page_size + 1,
                                                    request.include_pruned()));
  }
  v1::ListTrialsResponse response;
  for (const TrialRecord& t : trials) {
    if (t.index < start || (!request.include_pruned() && t.status == TrialStatus::kPruned)) {
      continue;
    }
    if (response.trials_size() == page_size) {
      response.set_next_page_token(absl::StrCat(t.index));
      break;
    }
    *response.add_trials() = TrialToProto(t);
  }
  return response;
}

absl::StatusOr<std::vector<v1::StrategyAnswer>> JobManager::QueryStrategies(
    const v1::QueryStrategiesRequest& q) {
  std::vector<StrategyRecord> records;
  if (q.model().family().empty() && q.model().config_json().empty()) {
    ASSIGN_OR_RETURN(records, store_->ListStrategies(100));
  } else {
    ASSIGN_OR_RETURN(ModelSpec model, ModelFromRequest(q.model()));
    if (q.seq_len() <= 0) return absl::InvalidArgumentError("seq_len: must be positive");
    if (q.global_batch_size() <= 0) {
      return absl::InvalidArgumentError("global_batch_size: must be positive");
    }
    const int world = q.world_size() > 0 ? q.world_size() : 1;
    const std::string device = q.device_type().empty() ? "cpu" : q.device_type();
    ASSIGN_OR_RETURN(std::optional<StrategyRecord> found,
                     store_->GetStrategy(ComputeSignature(model, q.seq_len(), q.global_batch_size(),
                                                          world, device)));
    if (found) records.push_back(*found);
  }
  std::vector<v1::StrategyAnswer> answers;
  for (const StrategyRecord& r : records) {
    v1::StrategyAnswer a;
    a.set_signature(r.signature);
    if (auto s = ParseStrategyText(r.strategy_text); s.ok()) *a.mutable_strategy() = ToProto(*s);
    a.set_strategy_json(r.strategy_json);
    *a.mutable_metrics() = ToProto(r.metrics);
    a.set_job_id(r.job_id);
    a.set_updated_at(UnixSecondsOrZero(r.updated_at));
    a.set_hardware(r.hardware);
    answers.push_back(std::move(a));
  }
  return answers;
}

absl::StatusOr<v1::RegisterResponse> JobManager::RegisterWorker(const v1::RegisterRequest& req) {
  if (req.worker_id().empty()) return absl::InvalidArgumentError("worker_id: missing");
  if (req.address().empty()) return absl::InvalidArgumentError("address: missing");
  if (req.devices().empty()) return absl::InvalidArgumentError("devices: at least one needed");
  int port_min = req.rendezvous_port_min(), port_max = req.rendezvous_port_max();
  if (port_min == 0 && port_max == 0) {  // a worker that does not say
    port_min = kDefaultRendezvousPortMin;
    port_max = kDefaultRendezvousPortMax;
  }
  if (port_min < 1 || port_max > 65535 || port_min > port_max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous_port_min, rendezvous_port_max: expected 1 <= min <= max <= 65535, got ",
        port_min, "-", port_max));
  }
  std::lock_guard<std::mutex> lock(mu_);
  WorkerState& w = workers_[req.worker_id()];
  const bool known = !w.info.worker_id().empty();
  w.info.set_worker_id(req.worker_id());
  w.info.set_address(req.address());
  w.info.mutable_devices()->CopyFrom(req.devices());
  // Ports held by trials still in flight stay held (their rank 0 answers and
  // frees them), even if they fall outside a new range.
  w.info.set_rendezvous_port_min(port_min);
  w.info.set_rendezvous_port_max(port_max);
  w.info.set_host_cpu_cores(std::max(0, req.host_cpu_cores()));
  w.info.set_host_memory_bytes(std::max<int64_t>(0, req.host_memory_bytes()));
  if (!known) w.info.set_registered_at(UnixSecondsOrZero(clock_->Now()));
  // Keep holds of ranks still in flight; their RPCs will come back and free them.
  w.held_by.resize(req.devices_size());
  w.last_seen = clock_->Now();
  w.healthy = true;
  WorkerRecord record;
  record.worker_id = req.worker_id();
  record.address = req.address();
  record.devices_json = ProtoToJson(w.info);
  record.registered_at = FromUnixSeconds(w.info.registered_at());
  record.last_seen = w.last_seen;
  if (absl::Status s = store_->UpsertWorker(record); !s.ok()) {
    spdlog::error("storing worker {}: {}", req.worker_id(), s.ToString());
  }
  spdlog::info("worker {} registered at {} with {} device(s)", req.worker_id(), req.address(),
               req.devices_size());
  for (const std::string& warning : HostWarningsLocked(w)) spdlog::warn("{}", warning);
  cv_.notify_all();
  v1::RegisterResponse resp;
  resp.set_heartbeat_interval_seconds(absl::ToDoubleSeconds(options_.heartbeat_interval));
  return resp;
}

absl::Status JobManager::Heartbeat(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id, " is not registered"));
  }
  it->second.last_seen = clock_->Now();
  if (!it->second.healthy) {
    spdlog::info("worker {} is back", worker_id);
    it->second.healthy = true;
    cv_.notify_all();
  }
  return absl::OkStatus();
}

JobManager::HostShare JobManager::HostShareLocked(const std::string& host) const {
  HostShare share;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy || HostOfAddress(w.info.address()) != host) continue;
    share.cores = std::max(share.cores, static_cast<int>(w.info.host_cpu_cores()));
    share.memory_bytes = std::max(share.memory_bytes, w.info.host_memory_bytes());
    for (const v1::Device& d : w.info.devices()) {
      if (d.type() != "cpu") continue;
      ++share.cpu_slots;
      share.cpu_memory_bytes += d.memory_bytes();
    }
  }
  return share;
}

int64_t JobManager::EffectiveMemoryLocked(const WorkerState& w, const v1::Device& d) const {
  if (d.type() != "cpu") return d.memory_bytes();
  const HostShare share = HostShareLocked(HostOfAddress(w.info.address()));
  if (share.memory_bytes <= 0 || share.cpu_memory_bytes <= share.memory_bytes) {
    return d.memory_bytes();
  }
  // Workers on one host claim more than it has: each slot gets its share.
  return static_cast<int64_t>(double(d.memory_bytes()) * double(share.memory_bytes) /
                              double(share.cpu_memory_bytes));
}

std::vector<std::string> JobManager::HostWarningsLocked(const WorkerState& w) const {
  std::vector<std::string> warnings;
  const std::string host = HostOfAddress(w.info.address());
  const HostShare share = HostShareLocked(host);
  if (share.cores > 0 && share.cpu_slots > share.cores) {
    warnings.push_back(absl::StrFormat(
        "the workers on %s offer %d cpu slots on %d cores: trials share cores, so their "
        "measurements are noisy and their ranking unreliable",
        host, share.cpu_slots, share.cores));
  }
  if (share.memory_bytes > 0 && share.cpu_memory_bytes > share.memory_bytes) {
    warnings.push_back(absl::StrFormat(
        "the workers on %s claim %.1f GiB of cpu device memory on a host with %.1f GiB: each "
        "slot counts with its share (give --device-memory to each worker)",
        host, share.cpu_memory_bytes / double(1 << 30), share.memory_bytes / double(1 << 30)));
  }
  return warnings;
}

std::vector<v1::Worker> JobManager::ListWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Worker> out;
  for (const auto& [id, w] : workers_) {
    v1::Worker info = w.info;
    for (const std::string& warning : HostWarningsLocked(w)) info.add_warnings(warning);
    info.set_healthy(w.healthy);
    info.set_last_seen(UnixSecondsOrZero(w.last_seen));
    for (int i = 0; i < info.devices_size() && i < static_cast<int>(w.held_by.size()); ++i) {
      info.mutable_devices(i)->set_held_by_trial(w.held_by[i]);
    }
    out.push_back(std::move(info));
  }
  return out;
}

void JobManager::TickLocked(std::vector<Dispatch>* dispatches, std::vector<Cancel>* cancels) {
  const absl::Time now = clock_->Now();
  // Worker health: a silent worker's ranks are lost.
  for (auto& [id, w] : workers_) {
    if (!w.healthy || now - w.last_seen <= options_.worker_timeout) continue;
    w.healthy = false;
    spdlog::warn("worker {} lost: no heartbeat for {}", id,
                 absl::FormatDuration(now - w.last_seen));
    const std::string silent = absl::FormatDuration(now - w.last_seen);
    for (const std::string& trial_id : std::vector<std::string>(w.held_by)) {
      if (trial_id.empty()) continue;
      for (auto& [job_id, job] : active_) {
        for (auto& t : job->trials) {
          if (t->record.trial_id != trial_id || t->record.status != TrialStatus::kRunning) {
            continue;
          }
          // Its ranks there will never answer (their RPCs still hold the
          // devices until they come back); the reason names the first one.
          int lost_rank = -1;
          for (int r = 0; r < static_cast<int>(t->ranks.size()); ++r) {
            Rank& rank = t->ranks[r];
            if (rank.worker_id != id || rank.finished) continue;
            if (lost_rank < 0) lost_rank = r;
            rank.finished = true;
            --t->ranks_pending;
          }
          if (lost_rank < 0) continue;
          RankOutcome lost;
          lost.infrastructure = true;
          lost.reason = t->ranks.size() > 1
                            ? absl::StrCat("worker lost (no heartbeat for ", silent, ")")
                            : absl::StrCat("worker ", id, " lost (no heartbeat for ", silent, ")");
          OnRankOutcomeLocked(job.get(), t.get(), lost_rank, lost, TrialMetrics(), cancels);
        }
      }
    }
  }
  std::vector<JobRun*> runnable;
  for (auto it = unstored_.begin(); it != unstored_.end();) {
    absl::Status s = store_->UpsertTrials(it->second.trials);
    if (s.ok()) s = store_->FinishJob(it->second.record, std::nullopt);
    if (!s.ok()) {
      ++it;
      continue;
    }
    spdlog::info("job {}: stored at last", it->first);
    it = unstored_.erase(it);
  }
  for (const std::string& id : std::vector<std::string>(active_order_)) {
    JobRun* job = active_[id].get();
    const std::string& type = job->request.device_type();
    if (!job->store_error.ok()) {
      FinishJobLocked(job, JobState::kFailed,
                      absl::StrCat("the database could not be written, so the job's results "
                                   "could not be kept (",
                                   job->store_error.message(), ")"),
                      cancels);
      continue;
    }
    if (now >= job->record.deadline) {
      FinishJobLocked(job, JobState::kSucceeded, kTimeLimitReached, cancels);
      continue;
    }
    if (job->searcher && (job->searcher->Finished() || SearchTimeUpLocked(*job)) &&
        job->running == 0 && job->retries.empty()) {
      if (job->search_ended.empty()) {
        // The search is over: before the job ends, its best few strategies
        // are measured again (dispatched below, interleaved).
        const int max_trials = job->request.max_trials();
        int run = 0;
        for (const auto& t : job->trials) run += t->record.status != TrialStatus::kPruned;
        job->search_ended = max_trials > 0 && run >= max_trials ? "trial budget spent"
                            : job->record.trials_total == static_cast<int>(job->trials.size())
                                ? "every candidate measured or pruned"
                            : job->searcher->Finished()
                                ? "search finished"
                                : "search stopped to leave time for the repeats";
        QueueConfirmationsLocked(job);
      }
      if (job->confirmations.empty()) {
        FinishJobLocked(job, JobState::kSucceeded, job->search_ended, cancels);
        continue;
      }
    }
    const int world = std::max(1, job->request.world_size());
    const int pool = CountDevicesLocked(type);
    if (pool < world) {
      const std::string message =
          pool == 0 ? absl::StrCat("waiting for a worker with ", type, " devices to register")
                    : absl::StrCat("waiting for workers: every trial needs ", world, " ", type,
                                   " devices, the healthy pool has ", pool);
      if (job->running == 0 && (job->record.state != JobState::kWaitingForWorkers ||
                                job->record.status_message != message)) {
        job->record.state = JobState::kWaitingForWorkers;
        job->record.status_message = message;
        PersistJobLocked(job);
      }
      continue;
    }
    if (!job->searcher) {
      if (absl::Status s = CreateSearcherLocked(job, pool); !s.ok()) {
        FinishJobLocked(job, JobState::kFailed, std::string(s.message()), cancels);
        continue;
      }
    }
    if (job->record.state == JobState::kQueued ||
        job->record.state == JobState::kWaitingForWorkers) {
      job->record.state = JobState::kRunning;
      if (job->record.started_at == absl::InfinitePast()) job->record.started_at = now;
      job->record.status_message = "running trials";
      PersistJobLocked(job);
    }
    runnable.push_back(job);
  }
  // The pool is shared: each free gang goes to the runnable job with the
  // fewest trials in flight (the earlier job on a tie), so jobs submitted
  // together all make progress instead of the first taking every device.
  while (!runnable.empty()) {
    auto next =
        std::min_element(runnable.begin(), runnable.end(),
                         [](const JobRun* a, const JobRun* b) { return a->running < b->running; });
    if (!DispatchOneLocked(*next, dispatches)) runnable.erase(next);
  }
}

int JobManager::CountDevicesLocked(const std::string& type) const {
  int count = 0;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy) continue;
    for (const v1::Device& d : w.info.devices()) count += d.type() == type ? 1 : 0;
  }
  return count;
}

int JobManager::FreePortLocked(const WorkerState& w) const {
  return ports_.Free(HostOfAddress(w.info.address()), w.info.rendezvous_port_min(),
                     w.info.rendezvous_port_max(), clock_->Now());
}

std::vector<JobManager::Rank> JobManager::FindFreeDevicesLocked(const std::string& type, int count,
                                                                int* port) {
  *port = 0;
  struct Candidate {
    const std::string* id;
    const WorkerState* w;
    std::vector<int> free;  // device positions
  };
  std::vector<Candidate> order;
  int total = 0;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy) continue;
    Candidate c{&id, &w, {}};
    for (int i = 0; i < w.info.devices_size() && i < static_cast<int>(w.held_by.size()); ++i) {
      if (w.info.devices(i).type() == type && w.held_by[i].empty()) c.free.push_back(i);
    }
    total += static_cast<int>(c.free.size());
    if (!c.free.empty()) order.push_back(std::move(c));
  }
  if (count <= 0 || total < count) return {};  // all or nothing
  // Packing order: if one worker can hold the whole trial, the one with the
  // fewest free devices that does (bigger holes stay for bigger gangs);
  // otherwise the workers with the most free devices first. Ties by id.
  std::stable_sort(order.begin(), order.end(), [count](const Candidate& a, const Candidate& b) {
    const int fa = static_cast<int>(a.free.size()), fb = static_cast<int>(b.free.size());
    const bool a_fits = fa >= count, b_fits = fb >= count;
    if (a_fits != b_fits) return a_fits;
    return a_fits ? fa < fb : fa > fb;
  });
  if (count > 1) {
    // Rank 0 serves the rendezvous store: its worker is the first in packing
    // order with a free port. Moving it ahead never spreads the trial wider.
    auto first = std::find_if(order.begin(), order.end(),
                              [this](const Candidate& c) { return FreePortLocked(*c.w) > 0; });
    if (first == order.end()) return {};
    *port = FreePortLocked(*first->w);
    std::rotate(order.begin(), first, first + 1);
  }
  std::vector<Rank> ranks;
  for (const Candidate& c : order) {
    for (size_t i = 0; i < c.free.size() && static_cast<int>(ranks.size()) < count; ++i) {
      Rank r;
      r.worker_id = *c.id;
      r.address = c.w->info.address();
      r.device_index = c.free[i];
      r.local_rank = static_cast<int>(i);
      ranks.push_back(r);
    }
  }
  return ranks;
}

bool JobManager::DispatchOneLocked(JobRun* job, std::vector<Dispatch>* dispatches) {
  const v1::TuneRequest& r = job->request;
  int port = 0;
  std::vector<Rank> ranks = FindFreeDevicesLocked(r.device_type(), r.world_size(), &port);
  if (ranks.empty()) return false;
  TrialRun* trial = nullptr;
  if (!job->retries.empty()) {  // a retry goes first: it was proposed first
    trial = job->retries.front();
    job->retries.pop_front();
    ++trial->record.attempt;
  } else if (!job->confirmations.empty()) {
    trial = job->confirmations.front();
    job->confirmations.pop_front();
  } else if (!job->search_ended.empty() || SearchTimeUpLocked(*job)) {
    return false;
  } else {
    std::optional<Proposal> proposal = job->searcher->Next();
    if (!proposal) return false;
    trial = NewTrialLocked(job, proposal->strategy);
    trial->measured_steps = proposal->measured_steps;
  }
  StartAttemptLocked(job, trial, std::move(ranks), port, dispatches);
  return true;
}

void JobManager::StartAttemptLocked(JobRun* job, TrialRun* trial, std::vector<Rank> ranks, int port,
                                    std::vector<Dispatch>* dispatches) {
  const v1::TuneRequest& r = job->request;
  TrialRecord& rec = trial->record;
  trial->ranks = std::move(ranks);
  trial->ranks_pending = static_cast<int>(trial->ranks.size());
  trial->master_port = port;
  trial->infrastructure_failure.reset();
  rec.status = TrialStatus::kRunning;
  rec.started_at = clock_->Now();
  rec.finished_at = absl::InfinitePast();
  std::vector<std::string> worker_ids;
  for (const Rank& rank : trial->ranks) worker_ids.push_back(rank.worker_id);
  rec.worker_id = absl::StrJoin(worker_ids, ",");
  if (rec.attempt > 1) {
    rec.reason = absl::StrCat("attempt ", rec.attempt, " after a failure outside the strategy");
  }

  absl::Duration timeout = std::min(absl::Seconds(r.trial_timeout_seconds()),
                                    job->record.deadline - clock_->Now() + absl::Seconds(5));
  TrialSpec spec;
  spec.trial_id = rec.trial_id;
  spec.attempt = rec.attempt;
  spec.world_size = static_cast<int>(trial->ranks.size());
  const std::string host = HostOfAddress(trial->ranks[0].address);
  if (port > 0) {
    spec.master_addr = host;
    spec.master_port = port;
    ports_.Acquire(host, port, PortHolder(rec.trial_id, rec.attempt));
  }
  spec.model = job->model;
  spec.seq_len = r.seq_len();
  spec.global_batch_size = r.global_batch_size();
  spec.strategy = trial->strategy;
  spec.warmup_steps = r.warmup_steps();
  spec.measured_steps = trial->measured_steps > 0 ? trial->measured_steps : r.measured_steps();
  spec.min_measured_seconds = r.min_measured_seconds();
  for (size_t i = 0; i < trial->ranks.size(); ++i) {
    const Rank& rank = trial->ranks[i];
    workers_[rank.worker_id].held_by[rank.device_index] = rec.trial_id;
    holds_[{rec.trial_id, rec.attempt, static_cast<int>(i)}] =
        RankHold{rank.worker_id, rank.device_index, i == 0 ? port : 0, host};
    spec.rank = static_cast<int>(i);
    spec.local_rank = rank.local_rank;
    Dispatch d;
    d.address = rank.address;
    d.request.set_trial_id(rec.trial_id);
    d.request.set_attempt(rec.attempt);
    d.request.set_device_index(rank.device_index);
    d.request.set_spec_json(TrialSpecToJson(spec).dump());
    d.request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
    if (job->script) d.request.set_model_file(*job->script);
    d.rpc_timeout = timeout + options_.rpc_grace;
    d.job_id = job->record.job_id;
    d.trial_id = rec.trial_id;
    d.attempt = rec.attempt;
    d.rank = static_cast<int>(i);
    dispatches->push_back(std::move(d));
  }
  spdlog::info("job {}: trial {}{} [{}] on {}{}", job->record.job_id, rec.index,
               rec.attempt > 1 ? absl::StrCat(" attempt ", rec.attempt) : "", rec.strategy_text,
               rec.worker_id,
               port > 0 ? absl::StrCat(" (rendezvous ", spec.master_addr, ":", port, ")") : "");
  ++job->running;
  PersistTrialLocked(job, trial);
}

DeviceSpec JobManager::DeviceSpecLocked(const std::string& type) const {
  DeviceSpec device;
  device.type = type;
  bool first = true;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy) continue;
    for (const v1::Device& d : w.info.devices()) {
      if (d.type() != type) continue;
      const int64_t memory = EffectiveMemoryLocked(w, d);
      if (first) {
        device.peak = FromProto(d.peak_tflops());
        device.memory_bytes = memory;
        first = false;
      } else if (memory > 0 && (device.memory_bytes == 0 || memory < device.memory_bytes)) {
        device.memory_bytes = memory;
      }
    }
  }
  return device;
}

absl::Status JobManager::CreateSearcherLocked(JobRun* job, int pool) {
  const v1::TuneRequest& r = job->request;
  SearchSetup setup;
  setup.algorithm = job->algorithm;
  setup.cost_model.emplace(job->model, r.seq_len(), r.global_batch_size(),
                           DeviceSpecLocked(r.device_type()));
  // The search stops early enough to leave the confirmations their share of
  // the time limit.
  setup.budget.deadline = job->record.deadline - (job->record.deadline - job->record.created_at) *
                                                     std::clamp(options_.confirm_reserve, 0.0, 1.0);
  setup.budget.max_trials = r.max_trials();
  setup.parallel_trials = std::max(1, pool / std::max(1, r.world_size()));
  setup.warmup_steps = r.warmup_steps();
  setup.measured_steps = r.measured_steps();
  setup.min_measured_seconds = r.min_measured_seconds();
  setup.clock = clock_;
  std::string description;
  if (job->load) {
    // Fill the loaded strategy's missing dimensions with the model's best
    // guess: the fastest predicted match that fits, else the smallest.
    const CostModel& model = *setup.cost_model;
    const Strategy* pick = nullptr;
    double pick_tps = -1;
    int64_t pick_memory = 0;
    bool pick_fits = false;
    for (const Strategy& s : job->space) {
      if (!job->load->Matches(s)) continue;
      const bool fits = model.Fits(s, setup.memory_margin, nullptr);
      const CostModel::Prediction p = model.Predict(s);
      const bool better = pick == nullptr || (fits && !pick_fits) ||
                          (fits == pick_fits && (fits ? p.tokens_per_second > pick_tps
                                                      : p.memory.total() < pick_memory));
      if (better) {
        pick = &s;
        pick_tps = p.tokens_per_second;
        pick_memory = p.memory.total();
        pick_fits = fits;
      }
    }
    if (pick == nullptr) return absl::InvalidArgumentError("load_strategy: no candidate matches");
    const Strategy start = *pick;
    if (r.finetune()) {
      // The neighbourhood: every candidate at most two dimensions away.
      for (const Strategy& s : job->space) {
        if (StrategyDistance(s, start) <= 2) setup.candidates.push_back(s);
      }
      setup.algorithm = SearchAlgorithm::kGreedy;
      setup.start = start;
      description = absl::StrFormat("finetune: greedy from %s over %d neighbours",
                                    StrategyToText(start), setup.candidates.size() - 1);
    } else {
      // Run as loaded: the trial is what confirms whether it fits.
      setup.candidates = {start};
      setup.algorithm = SearchAlgorithm::kExhaustive;
      setup.memory_margin = std::numeric_limits<double>::infinity();
      description = absl::StrCat("load_strategy: runs ", StrategyToText(start), " once");
    }
  } else {
    setup.candidates = job->space;
  }
  const int candidates = static_cast<int>(setup.candidates.size());
  ASSIGN_OR_RETURN(job->searcher, CreateSearcher(std::move(setup)));
  job->space.clear();
  job->space.shrink_to_fit();
  job->record.trials_total = candidates;
  job->record.algorithm = description.empty() ? job->searcher->Describe() : description;
  spdlog::info("job {}: {}", job->record.job_id, job->record.algorithm);
  PersistJobLocked(job);
  RecordPrunedLocked(job);
  return absl::OkStatus();
}

void JobManager::RecordPrunedLocked(JobRun* job) {
  std::vector<PrunedStrategy> pruned = job->searcher->TakePruned();
  if (pruned.empty()) return;
  const absl::Time now = clock_->Now();
  std::vector<TrialRecord> records;
  records.reserve(pruned.size());
  for (PrunedStrategy& p : pruned) {
    TrialRun* trial = NewTrialLocked(job, p.strategy);
    TrialRecord& rec = trial->record;
    rec.attempt = 0;  // never run
    rec.status = TrialStatus::kPruned;
    rec.reason = std::move(p.reason);
    rec.started_at = rec.finished_at = now;
    records.push_back(rec);
    trial->version = job->version + 1;
  }
  ++job->version;
  if (absl::Status s = store_->UpsertTrials(records); !s.ok()) {
    spdlog::error("job {}: storing {} pruned candidates failed: {}", job->record.job_id,
                  records.size(), s.ToString());
    if (job->store_error.ok()) job->store_error = s;
  }
  spdlog::info("job {}: pruned {} candidate(s), e.g. {}: {}", job->record.job_id, records.size(),
               records.front().strategy_text, records.front().reason);
}

void JobManager::ReleaseRankLocked(const std::string& trial_id, int attempt, int rank) {
  auto hold = holds_.find({trial_id, attempt, rank});
  if (hold == holds_.end()) return;
  auto it = workers_.find(hold->second.worker_id);
  if (it != workers_.end()) {
    auto& held = it->second.held_by;
    const int device = hold->second.device_index;
    if (device >= 0 && device < static_cast<int>(held.size()) && held[device] == trial_id) {
      held[device].clear();
    }
  }
  // The store lives in rank 0's process: its port is free once it answered.
  if (hold->second.port > 0) {
    ports_.Release(hold->second.host, hold->second.port, PortHolder(trial_id, attempt));
  }
  holds_.erase(hold);
}

void JobManager::CancelRanksLocked(const TrialRun& trial, std::vector<Cancel>* cancels) {
  std::set<std::string> told;
  for (const Rank& rank : trial.ranks) {
    if (rank.finished || !told.insert(rank.address).second) continue;
    Cancel c;
    c.address = rank.address;
    c.request.set_trial_id(trial.record.trial_id);
    c.request.set_attempt(trial.record.attempt);
    cancels->push_back(std::move(c));
  }
}

void JobManager::OnRankDone(const std::string& job_id, const std::string& trial_id, int attempt,
                            int rank_index, absl::Status status, v1::RunTrialResponse response) {
  std::vector<Cancel> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --rpcs_in_flight_;
    // Whatever became of the trial (or its job), this rank's device is free.
    ReleaseRankLocked(trial_id, attempt, rank_index);
    auto job_it = active_.find(job_id);
    TrialRun* trial = nullptr;
    if (job_it != active_.end()) {
      for (auto& t : job_it->second->trials) {
        if (t->record.trial_id == trial_id) trial = t.get();
      }
    }
    // An answer of an earlier attempt changes nothing but the holds.
    if (trial != nullptr && trial->record.attempt == attempt &&
        trial->record.status == TrialStatus::kRunning && rank_index >= 0 &&
        rank_index < static_cast<int>(trial->ranks.size()) && !trial->ranks[rank_index].finished) {
      Rank& rank = trial->ranks[rank_index];
      rank.finished = true;
      --trial->ranks_pending;
      if (status.code() == absl::StatusCode::kUnavailable) {
        // The worker did not answer at all: keep new trials off it until it
        // heartbeats again, rather than feed it trials that fail the same way.
        auto w = workers_.find(rank.worker_id);
        if (w != workers_.end() && w->second.healthy) {
          w->second.healthy = false;
          spdlog::warn("worker {} unreachable ({}); no new trials until it heartbeats",
                       rank.worker_id, std::string(status.message()));
        }
      }
      JobRun* job = job_it->second.get();
      if (clock_->Now() >= job->record.deadline) {
        // The answer came after the time limit: the trial was still running
        // then, so the job ends now, as the scheduler would have ended it,
        // and the trial is recorded CANCELLED. `job` and `trial` are gone.
        FinishJobLocked(job, JobState::kSucceeded, kTimeLimitReached, &cancels);
      } else {
        OnRankOutcomeLocked(job, trial, rank_index, RankOutcomeOf(status, response),
                            FromProto(response.metrics()), &cancels);
      }
    }
  }
  cv_.notify_all();
  SendAll({}, std::move(cancels));
}

void JobManager::OnRankOutcomeLocked(JobRun* job, TrialRun* trial, int rank_index,
                                     RankOutcome outcome, const TrialMetrics& metrics,
                                     std::vector<Cancel>* cancels) {
  Rank& rank = trial->ranks[rank_index];
  // "rank 1 on worker w2: " for a rank of a multi-rank trial; a single
  // rank's reason names the worker only where the worker said nothing.
  const bool timed_out_rpc = outcome.status == TrialStatus::kTimeout && outcome.reason.empty();
  if (trial->ranks.size() > 1) {
    outcome.reason = absl::StrCat(RankPrefix(trial->ranks.size(), rank_index, rank.worker_id),
                                  timed_out_rpc ? "no answer before the deadline" : outcome.reason);
  } else if (timed_out_rpc) {
    outcome.reason = absl::StrCat("no answer from worker ", rank.worker_id, " before the deadline");
  } else if (outcome.infrastructure && !absl::StartsWith(outcome.reason, "worker ")) {
    outcome.reason = absl::StrCat("worker ", rank.worker_id, ": ", outcome.reason);
  }
  switch (outcome.status) {
    case TrialStatus::kSucceeded:
      rank.metrics = metrics;
      break;
    case TrialStatus::kCancelled:
      // Cancelled by us after a sibling's infrastructure failure; or by its
      // worker (shutting down), which is one too.
      if (!trial->infrastructure_failure) {
        outcome.status = TrialStatus::kFailed;
        outcome.infrastructure = true;
        trial->infrastructure_failure = outcome;
        CancelRanksLocked(*trial, cancels);
      }
      break;
    case TrialStatus::kFailed:
      if (outcome.infrastructure) {
        if (!trial->infrastructure_failure) {
          trial->infrastructure_failure = outcome;
          CancelRanksLocked(*trial, cancels);
        }
        break;
      }
      [[fallthrough]];
    default:
      // The strategy's own outcome (OOM, its error, a timeout) ends the
      // trial at once, whatever its siblings say later.
      EndTrialLocked(job, trial, outcome.status, outcome.reason, metrics, cancels);
      return;
  }
  if (trial->ranks_pending > 0) return;
  if (trial->infrastructure_failure) {
    RetryOrGiveUpLocked(job, trial, cancels);
    return;
  }
  const TrialMetrics gang = GangMetrics(*trial);
  const std::string impossible =
      ImpossibleMeasurement(gang, job->model.TrainingFlopsPerToken(job->request.seq_len()),
                            static_cast<int>(trial->ranks.size()));
  if (!impossible.empty()) {
    EndTrialLocked(job, trial, TrialStatus::kFailed, impossible, TrialMetrics(), cancels);
  } else {
    EndTrialLocked(job, trial, TrialStatus::kSucceeded, MfuAbovePeak(gang), gang, cancels);
  }
}

void JobManager::RetryOrGiveUpLocked(JobRun* job, TrialRun* trial, std::vector<Cancel>* cancels) {
  TrialRecord& rec = trial->record;
  const std::string why = trial->infrastructure_failure->reason;
  if (trial->master_port > 0 && !trial->ranks.empty()) {
    // The port may be what failed (another process bound it): the next
    // attempt, and every other trial, gets another one for a while.
    ports_.Quarantine(HostOfAddress(trial->ranks[0].address), trial->master_port,
                      clock_->Now() + options_.port_quarantine);
  }
  rec.failed_attempts.push_back(absl::StrCat("attempt ", rec.attempt, ": ", why));
  if (rec.attempt < options_.max_attempts && clock_->Now() < job->record.deadline) {
    rec.status = TrialStatus::kPending;
    rec.reason = absl::StrCat("attempt ", rec.attempt, " failed outside the strategy (", why,
                              "); waiting for attempt ", rec.attempt + 1);
    rec.finished_at = absl::InfinitePast();
    trial->infrastructure_failure.reset();
    --job->running;
    job->retries.push_back(trial);
    spdlog::warn("job {}: trial {} attempt {} failed outside the strategy: {}; retrying",
                 job->record.job_id, rec.index, rec.attempt, why);
    PersistTrialLocked(job, trial);
    return;
  }
  rec.infrastructure = true;
  EndTrialLocked(job, trial, TrialStatus::kFailed,
                 absl::StrCat("failed outside the strategy on all ", rec.attempt,
                              " attempt(s), not a measurement (last: ", why, ")"),
                 TrialMetrics(), cancels);
}

TrialMetrics JobManager::GangMetrics(const TrialRun& trial) {
  // Rank 0 measures the gang's throughput and step times (the slowest rank's,
  // which every rank reports); memory and communication time are the worst
  // rank's.
  TrialMetrics out =
      trial.ranks.empty() || !trial.ranks[0].metrics ? TrialMetrics() : *trial.ranks[0].metrics;
  out.rank_peak_memory_bytes.assign(trial.ranks.size(), 0);
  out.peak_memory_bytes = 0;
  for (size_t i = 0; i < trial.ranks.size(); ++i) {
    if (!trial.ranks[i].metrics) continue;
    const TrialMetrics& m = *trial.ranks[i].metrics;
    out.rank_peak_memory_bytes[i] = m.peak_memory_bytes;
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, m.peak_memory_bytes);
    out.peak_rss_bytes = std::max(out.peak_rss_bytes, m.peak_rss_bytes);
    out.comm_time_s = std::max(out.comm_time_s, m.comm_time_s);
    out.state_memory_bytes = std::max(out.state_memory_bytes, m.state_memory_bytes);
  }
  return out;
}

void JobManager::EndTrialLocked(JobRun* job, TrialRun* trial, TrialStatus status,
                                const std::string& reason, const TrialMetrics& metrics,
                                std::vector<Cancel>* cancels) {
  TrialRecord& rec = trial->record;
  if (rec.status == TrialStatus::kRunning) {
    --job->running;
  } else if (rec.status == TrialStatus::kPending) {  // waiting for a retry or to confirm
    job->retries.erase(std::remove(job->retries.begin(), job->retries.end(), trial),
                       job->retries.end());
    job->confirmations.erase(
        std::remove(job->confirmations.begin(), job->confirmations.end(), trial),
        job->confirmations.end());
  }
  rec.status = status;
  rec.reason = reason;
  rec.metrics = metrics;
  rec.finished_at = clock_->Now();
  // One CancelTrial per worker stops all of the trial's ranks there.
  if (status != TrialStatus::kSucceeded) CancelRanksLocked(*trial, cancels);
  if (rec.confirms.empty()) {  // the searcher's proposal (it never sees confirmations)
    ScoredTrial scored;
    scored.strategy = trial->strategy;
    // A trial lost to infrastructure failures measured nothing: the searcher
    // hears of it as cancelled, never as the strategy failing.
    scored.status = rec.infrastructure ? TrialStatus::kCancelled : status;
    scored.metrics = metrics;
    job->searcher->Report(scored);
    RecordPrunedLocked(job);
  }
  if (status == TrialStatus::kSucceeded) {
    job->record.best_trial_id = AnswerLocked(*job).trial_id;
    job->record.status_message =
        absl::StrFormat("%d trial(s) done", static_cast<int>(job->trials.size()) - job->running);
    PersistJobLocked(job);
  }
  spdlog::info("job {}: trial {} {} {}{}", job->record.job_id, rec.index,
               std::string(TrialStatusName(status)),
               status == TrialStatus::kSucceeded
                   ? absl::StrFormat("%.0f tokens/s", metrics.tokens_per_second)
                   : "",
               reason);
  PersistTrialLocked(job, trial);
}

void JobManager::FinishJobLocked(JobRun* job, JobState state, const std::string& message,
                                 std::vector<Cancel>* cancels) {
  const std::string reason =
      state == JobState::kCancelled ? message : absl::StrCat("job ended: ", message);
  for (auto& t : job->trials) {
    if (!IsTerminal(t->record.status)) {
      EndTrialLocked(job, t.get(), TrialStatus::kCancelled, reason, TrialMetrics(), cancels);
    }
  }
  JobRecord& rec = job->record;
  rec.finished_at = clock_->Now();
  std::optional<StrategyRecord> best_record;
  std::vector<TrialRecord> records;
  records.reserve(job->trials.size());
  for (const auto& t : job->trials) records.push_back(t->record);
  const Answer answer = ChooseAnswer(records, 0);
  rec.best_trial_id = answer.trial_id;
  const TrialRecord* best = nullptr;
  for (const TrialRecord& t : records) {
    if (t.trial_id == rec.best_trial_id) best = &t;
  }
  if (state == JobState::kSucceeded && best == nullptr) {
    std::map<std::string, int> counts;
    int noisy = 0;
    for (const TrialRecord& t : records) {
      counts[std::string(TrialStatusName(t.status))]++;
      noisy += t.status == TrialStatus::kSucceeded && t.metrics.IsNoisy();
    }
    std::vector<std::string> parts;
    for (const auto& [name, n] : counts) parts.push_back(absl::StrCat(n, " ", name));
    state = JobState::kFailed;
    rec.status_message =
        absl::StrCat(message,
                     noisy > 0 && noisy == counts["SUCCEEDED"]
                         ? "; every measurement was noisy and none could be repeated in time"
                         : "; no trial succeeded",
                     parts.empty() ? std::string(" (no trial ran)")
                                   : absl::StrCat(" (", absl::StrJoin(parts, ", "), ")"));
  } else if (best != nullptr) {
    int run = 0, pruned = 0;
    for (const TrialRecord& t : records) ++(t.status == TrialStatus::kPruned ? pruned : run);
    rec.status_message = absl::StrFormat(
        "%s; best %s at %.0f tokens/s %s after %d trial(s)%s", message, best->strategy_text,
        best->metrics.tokens_per_second,
        answer.confirmed
            ? absl::StrFormat("(measured %d times, spread %.0f%%; first %.0f tokens/s)",
                              answer.measurements, 100 * answer.spread,
                              answer.first_tokens_per_second)
            : std::string("(measured once: no time was left to measure it again)"),
        run, pruned > 0 ? absl::StrFormat(" (%d candidate(s) pruned)", pruned) : "");
  } else {
    rec.status_message = message;
  }
  const InfrastructureSummary infra = SummariseInfrastructure(records);
  const bool partial = infra.trials_lost > 0;
  if (partial) {
    absl::StrAppend(&rec.status_message, "; partial evidence: ", infra.trials_lost,
                    " trial(s) lost to infrastructure failures after every retry (",
                    infra.reasons.front(), ")");
    if (best != nullptr && !job->request.store_partial()) {
      absl::StrAppend(&rec.status_message,
                      "; not stored as the signature's answer (store_partial stores it)");
    }
  } else if (infra.failures > 0) {
    absl::StrAppend(&rec.status_message, "; ", infra.failures,
                    " attempt(s) retried after infrastructure failures");
  }
  rec.state = state;
  if (state == JobState::kSucceeded && best != nullptr &&
      (!partial || job->request.store_partial())) {
    StrategyRecord s;
    s.signature = rec.signature;
    s.model_family = job->model.family;
    s.model_config_json = job->model.ToConfigJson().dump();
    s.seq_len = job->request.seq_len();
    s.global_batch_size = job->request.global_batch_size();
    s.hardware = HardwareName(job->request.device_type(), job->request.world_size());
    s.strategy_text = best->strategy_text;
    s.strategy_json = best->strategy_json;
    s.metrics = best->metrics;
    s.job_id = rec.job_id;
    s.updated_at = rec.finished_at;
    s.confirmed = answer.confirmed;
    // A confirmed answer replaces one measured once (an outlier must not
    // stay forever); between two of the same kind the faster stays.
    absl::StatusOr<std::optional<StrategyRecord>> old = store_->GetStrategy(rec.signature);
    if (!old.ok() || !old->has_value() || (s.confirmed && !(*old)->confirmed) ||
        (s.confirmed == (*old)->confirmed &&
         (*old)->metrics.tokens_per_second <= s.metrics.tokens_per_second)) {
      best_record = std::move(s);
    }
  }
  // After a failed write, what the store holds of the trials may be stale:
  // write them all again with the job.
  absl::Status stored = job->store_error.ok() ? absl::OkStatus() : store_->UpsertTrials(records);
  if (stored.ok()) stored = store_->FinishJob(rec, best_record);
  if (const absl::Status& s = stored; !s.ok()) {
    // Kept here, answered from here and written again every tick: clients
    // never see the job go back to RUNNING.
    spdlog::error("job {}: storing the result failed ({}); keeping it in memory and retrying",
                  rec.job_id, s.ToString());
    unstored_[rec.job_id] = UnstoredJob{rec, std::move(records)};
  }
  spdlog::info("job {}: {} — {}", rec.job_id, std::string(JobStateName(state)), rec.status_message);
  active_order_.erase(std::find(active_order_.begin(), active_order_.end(), rec.job_id));
  active_.erase(rec.job_id);  // `job` is gone after this line
}

bool JobManager::SearchTimeUpLocked(const JobRun& job) const {
  if (options_.confirm_top <= 0) return false;
  // How long the search's trials took so far (start to answer), by median.
  std::vector<double> seconds;
  int succeeded = 0;
  for (const auto& t : job.trials) {
    const TrialRecord& r = t->record;
    if (r.status != TrialStatus::kSucceeded || !r.confirms.empty()) continue;
    ++succeeded;
    seconds.push_back(absl::ToDoubleSeconds(r.finished_at - r.started_at));
  }
  if (seconds.empty()) return false;  // nothing to confirm yet
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  const int world = std::max(1, job.request.world_size());
  const int gangs = std::max(1, CountDevicesLocked(job.request.device_type()) / world);
  const int repeats = std::min(options_.confirm_top, succeeded);
  // The repeats, a quarter more for safety, and one trial's length for the
  // search trials still running.
  const double reserve =
      seconds[seconds.size() / 2] * (1.25 * std::ceil(double(repeats) / gangs) + 1);
  return clock_->Now() + absl::Seconds(reserve) >= job.record.deadline;
}

JobManager::TrialRun* JobManager::NewTrialLocked(JobRun* job, const Strategy& strategy) {
  auto trial = std::make_unique<TrialRun>();
  trial->strategy = strategy;
  TrialRecord& rec = trial->record;
  rec.index = static_cast<int>(job->trials.size());
  rec.trial_id = absl::StrFormat("%s-t%04d", job->record.job_id, rec.index);
  rec.job_id = job->record.job_id;
  rec.attempt = 1;
  rec.strategy_text = StrategyToText(strategy);
  rec.strategy_json = StrategyToJson(strategy).dump();
  job->trials.push_back(std::move(trial));
  return job->trials.back().get();
}

Answer JobManager::AnswerLocked(const JobRun& job) const {
  // Only measurements can answer: the (possibly tens of thousands of) pruned
  // candidates are not copied on every finished trial.
  std::vector<TrialRecord> measured;
  for (const auto& t : job.trials) {
    if (t->record.status == TrialStatus::kSucceeded) measured.push_back(t->record);
  }
  return ChooseAnswer(measured, 0);
}

void JobManager::QueueConfirmationsLocked(JobRun* job) {
  if (options_.confirm_top <= 0) return;
  std::vector<TrialRecord> records;
  records.reserve(job->trials.size());
  for (const auto& t : job->trials) records.push_back(t->record);
  std::vector<TrialRun*> originals;
  for (const TrialRecord* t : TrialsToConfirm(records, options_.confirm_top, 0)) {
    originals.push_back(job->trials[t->index].get());
  }
  if (originals.empty()) return;
  std::vector<std::string> names;
  for (TrialRun* original : originals) {
    TrialRun* confirm = NewTrialLocked(job, original->strategy);
    TrialRecord& rec = confirm->record;
    rec.status = TrialStatus::kPending;
    rec.confirms = original->record.trial_id;
    rec.reason = absl::StrCat("waiting to measure trial ", original->record.index, " again");
    names.push_back(absl::StrCat(original->record.index));
    job->confirmations.push_back(confirm);
    PersistTrialLocked(job, confirm);
  }
  job->record.status_message =
      absl::StrCat(job->search_ended, "; measuring the best ", originals.size(), " again (trials ",
                   absl::StrJoin(names, ", "), ")");
  spdlog::info("job {}: {}", job->record.job_id, job->record.status_message);
  PersistJobLocked(job);
}

void JobManager::PersistJobLocked(JobRun* job) {
  ++job->version;
  if (absl::Status s = store_->UpdateJob(job->record); !s.ok()) {
    spdlog::error("job {}: store update failed: {}", job->record.job_id, s.ToString());
    if (job->store_error.ok()) job->store_error = s;
  }
}

void JobManager::PersistTrialLocked(JobRun* job, TrialRun* trial) {
  trial->version = ++job->version;
  if (absl::Status s = store_->UpsertTrial(trial->record); !s.ok()) {
    spdlog::error("trial {}: store update failed: {}", trial->record.trial_id, s.ToString());
    if (job->store_error.ok()) job->store_error = s;
  }
}

v1::Job JobManager::JobToProtoLocked(const JobRun& job) const {
  std::vector<TrialRecord> trials;
  trials.reserve(job.trials.size());
  for (const auto& t : job.trials) trials.push_back(t->record);
  v1::Job out = JobRecordToProto(job.record, trials);
  *out.mutable_request() = job.request;
  out.set_elapsed_seconds(absl::ToDoubleSeconds(clock_->Now() - job.record.created_at));
  return out;
}

std::string JobManager::NewJobIdLocked() {
  // 48 random bits: a thousand jobs submitted in one second collide with
  // odds of about one in a billion (SubmitJob draws again if they do).
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("job-%s-%012x",
                         absl::FormatTime("%Y%m%d-%H%M%S", clock_->Now(), absl::UTCTimeZone()),
                         (rng() ^ ++job_counter_) & 0xffffffffffffULL);
}

}  // namespace autoaccel
