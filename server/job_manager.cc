#include "server/job_manager.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/trial_io.h"
#include "proto/convert.h"
#include "search/cost_model.h"
#include "search/methods.h"
#include "search/space.h"
#include "server/signature.h"

namespace autoaccel {
namespace {

// The model a request describes: its config.json with the overrides applied.
// Default warm-up for torchscript jobs (see Validate).
constexpr int kTorchScriptWarmupSteps = 3;

absl::StatusOr<ModelSpec> ModelFromRequest(const v1::ModelSpec& m) {
  if (m.family() == "torchscript") {
    if (!m.overrides().empty()) {
      return absl::InvalidArgumentError(
          "override: not supported for torchscript models (change the module and save it again)");
    }
    if (m.script().empty()) {
      return absl::InvalidArgumentError("model_file: missing or empty (--model-file FILE.pt)");
    }
    if (m.input_spec().empty()) {
      return absl::InvalidArgumentError(
          "input_spec: missing (--input-spec, e.g. \"input_ids:int64[B,T]<50257; "
          "labels=input_ids\")");
    }
    const nlohmann::json config{{"input_spec", m.input_spec()},
                                {"script_digest", ContentDigest(m.script())},
                                {"script_bytes", static_cast<int64_t>(m.script().size())}};
    return ModelSpecFromJson(m.family(), config);
  }
  nlohmann::json config =
      nlohmann::json::parse(m.config_json(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return absl::InvalidArgumentError("model_config: not valid JSON");
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const std::string& text : m.overrides()) {
    ASSIGN_OR_RETURN(auto kv, ParseOverride(text));
    overrides.push_back(std::move(kv));
  }
  RETURN_IF_ERROR(ApplyOverrides(overrides, &config));
  return ModelSpecFromJson(m.family(), config);
}

struct ValidatedRequest {
  v1::TuneRequest request;  // with defaults filled in
  ModelSpec model;
  std::vector<Strategy> space;  // compatible, and allowed by --include / --exclude
  SearchAlgorithm algorithm = SearchAlgorithm::kAuto;
  std::optional<PartialStrategy> load;  // --load-strategy
};

absl::StatusOr<ValidatedRequest> Validate(const v1::TuneRequest& in,
                                          const JobManagerOptions& options) {
  ValidatedRequest out;
  out.request = in;
  v1::TuneRequest& r = out.request;
  if (r.model().family().empty()) {
    return absl::InvalidArgumentError(
        "model.family: missing (allowed: " + absl::StrJoin(KnownModelFamilies(), ", ") + ")");
  }
  ASSIGN_OR_RETURN(out.model, ModelFromRequest(r.model()));
  if (!(r.time_limit_seconds() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_limit: must be positive, got ", r.time_limit_seconds(), "s"));
  }
  if (r.max_trials() < 0) return absl::InvalidArgumentError("max_trials: must be >= 0");
  // Every trial runs world_size ranks (the search space's layouts multiply
  // to it); a bad one is refused by ValidateSpaceRequest, naming the field.
  if (r.world_size() == 0) r.set_world_size(1);
  if (r.device_type().empty()) r.set_device_type("cpu");
  if (r.device_type() != "cpu" && r.device_type() != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("device_type: unknown '", r.device_type(), "' (allowed: cpu, cuda)"));
  }
  if (r.warmup_steps() < 0 || r.measured_steps() < 0 || r.trial_timeout_seconds() < 0) {
    return absl::InvalidArgumentError(
        "warmup_steps, measured_steps, trial_timeout_seconds: must not be negative");
  }
  if (r.warmup_steps() == 0) {
    // TorchScript's executor profiles and optimises the graph over the first
    // calls (~3 steps): measuring them would time the compiler, not the model.
    r.set_warmup_steps(r.model().family() == "torchscript"
                           ? std::max(options.default_warmup_steps, kTorchScriptWarmupSteps)
                           : options.default_warmup_steps);
  }
  if (r.measured_steps() == 0) r.set_measured_steps(options.default_measured_steps);
  if (r.trial_timeout_seconds() == 0) {
    r.set_trial_timeout_seconds(absl::ToDoubleSeconds(options.default_trial_timeout));
  }
  SpaceRequest space;
  space.model = out.model;
  space.seq_len = r.seq_len();
  space.global_batch_size = r.global_batch_size();
  space.world_size = r.world_size();
  space.micro_batch_sizes.assign(r.micro_batch_sizes().begin(), r.micro_batch_sizes().end());
  // Candidate names as in Strategy; a bad one is reported under the request
  // field: "precisions: unknown value 'fp8' (allowed: ...)".
  const auto parse_names = [](absl::string_view field, const auto& names, auto parse,
                              auto* values) -> absl::Status {
    for (const std::string& name : names) {
      auto value = parse(name);
      if (!value.ok()) {
        absl::string_view why = value.status().message();  // "strategy.<key>: <why>"
        if (size_t colon = why.find(": "); colon != absl::string_view::npos) {
          why.remove_prefix(colon + 2);
        }
        return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
      }
      values->push_back(*value);
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(parse_names("precisions", r.precisions(), &ParsePrecision, &space.precisions));
  RETURN_IF_ERROR(parse_names("checkpointings", r.checkpointings(), &ParseCheckpointing,
                              &space.checkpointings));
  RETURN_IF_ERROR(parse_names("attentions", r.attentions(), &ParseAttention, &space.attentions));
  RETURN_IF_ERROR(parse_names("optimizers", r.optimizers(), &ParseOptimizer, &space.optimizers));
  RETURN_IF_ERROR(parse_names("offloads", r.offloads(), &ParseOffload, &space.offloads));
  RETURN_IF_ERROR(parse_names("shardings", r.shardings(), &ParseSharding, &space.shardings));
  RETURN_IF_ERROR(parse_names("pipeline_schedules", r.pipeline_schedules(), &ParsePipelineSchedule,
                              &space.pipeline_schedules));
  const auto parse_sp_mode = [](const std::string& name) -> absl::StatusOr<bool> {
    if (name == "off" || name == "on") return name == "on";
    return absl::InvalidArgumentError(
        absl::StrCat("strategy.sequence_parallel: unknown value '", name, "' (allowed: off, on)"));
  };
  RETURN_IF_ERROR(parse_names("sequence_parallel", r.sequence_parallel(), parse_sp_mode,
                              &space.sequence_parallel_modes));
  space.tensor_parallel_sizes.assign(r.tensor_parallel_sizes().begin(),
                                     r.tensor_parallel_sizes().end());
  space.pipeline_parallel_sizes.assign(r.pipeline_parallel_sizes().begin(),
                                       r.pipeline_parallel_sizes().end());
  space.virtual_stages.assign(r.virtual_stages().begin(), r.virtual_stages().end());
  space.checkpoint_percents.assign(r.checkpoint_percents().begin(), r.checkpoint_percents().end());
  space.device_is_accelerator = r.device_type() == "cuda";
  ASSIGN_OR_RETURN(out.space, EnumerateSpace(space));
  if (r.algorithm().empty()) r.set_algorithm("auto");
  ASSIGN_OR_RETURN(out.algorithm, ParseSearchAlgorithm(r.algorithm()));
  const std::vector<std::string> include(r.include().begin(), r.include().end());
  const std::vector<std::string> exclude(r.exclude().begin(), r.exclude().end());
  ASSIGN_OR_RETURN(MethodFilter filter, ParseMethodFilter(include, exclude));
  if (!filter.empty()) {
    const size_t before = out.space.size();
    std::string example;
    out.space.erase(std::remove_if(out.space.begin(), out.space.end(),
                                   [&](const Strategy& s) {
                                     if (filter.Allows(s)) return false;
                                     if (example.empty()) example = filter.Refusal(s);
                                     return true;
                                   }),
                    out.space.end());
    if (out.space.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("include, exclude: none of the ", before,
                                                     " candidate strategies is left (e.g. ",
                                                     example, ")"));
    }
  }
  if (r.finetune() && r.load_strategy().empty()) {
    return absl::InvalidArgumentError("finetune: needs a strategy to start from (--load-strategy)");
  }
  if (!r.load_strategy().empty()) {
    if (r.algorithm() != "auto") {
      return absl::InvalidArgumentError(
          "algorithm: not with load_strategy (it runs the loaded strategy, or with finetune "
          "searches its neighbourhood greedily)");
    }
    ASSIGN_OR_RETURN(PartialStrategy load, ParseLoadStrategy(r.load_strategy()));
    if (std::none_of(out.space.begin(), out.space.end(),
                     [&](const Strategy& s) { return load.Matches(s); })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "load_strategy: no candidate of the space matches '", load.ToText(),
          "' (check its values against the request's world size, batch and candidate lists)"));
    }
    out.load = std::move(load);
  }
  return out;
}

absl::Time FromUnixSeconds(double s) {
  return s == 0 ? absl::InfinitePast() : absl::UnixEpoch() + absl::Seconds(s);
}

// How a job that reached its time limit ends (its running trials are
// cancelled with "job ended: " and this).
constexpr char kTimeLimitReached[] = "time limit reached";

// "rank 1 on worker w2: " for a rank of a multi-rank trial, "" for a single
// rank (its trial's reason needs no such prefix).
std::string RankPrefix(size_t world_size, int rank, const std::string& worker_id) {
  return world_size > 1 ? absl::StrCat("rank ", rank, " on worker ", worker_id, ": ") : "";
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
  return t;
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
  for (const TrialRecord& t : trials) {
    if (IsTerminal(t.status)) ++done;
    if (t.status == TrialStatus::kPruned) ++pruned;
    if (t.status == TrialStatus::kRunning) ++running;
    if (!r.best_trial_id.empty() && t.trial_id == r.best_trial_id) {
      *j.mutable_best() = TrialToProto(t);
    }
  }
  j.set_trials_done(done);
  j.set_trials_running(running);
  j.set_trials_pruned(pruned);
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
    int rank = d.rank;
    executor_->RunTrial(d.address, d.request, d.rpc_timeout,
                        [this, job_id, trial_id, rank](absl::Status s, v1::RunTrialResponse r) {
                          OnRankDone(job_id, trial_id, rank, std::move(s), std::move(r));
                        });
  }
}

absl::StatusOr<v1::Job> JobManager::SubmitJob(const v1::TuneRequest& request) {
  ASSIGN_OR_RETURN(ValidatedRequest valid, Validate(request, options_));
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
  RETURN_IF_ERROR(store_->CreateJob(rec));
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
  uint64_t version = 0;
  ASSIGN_OR_RETURN(v1::JobEvent event, GetJobEvent(job_id, &version));
  return event.job();
}

absl::StatusOr<v1::JobEvent> JobManager::GetJobEvent(const std::string& job_id, uint64_t* version) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) {
      v1::JobEvent event;
      *event.mutable_job() = JobToProtoLocked(*it->second);
      for (const auto& t : it->second->trials) *event.add_trials() = TrialToProto(t->record);
      *version = it->second->version;
      return event;
    }
  }
  ASSIGN_OR_RETURN(JobRecord record, store_->GetJob(job_id));
  ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store_->ListTrials(job_id));
  v1::JobEvent event;
  *event.mutable_job() = JobRecordToProto(record, trials);
  for (const TrialRecord& t : trials) *event.add_trials() = TrialToProto(t);
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
  ASSIGN_OR_RETURN(std::vector<JobRecord> records, store_->ListJobs(limit > 0 ? limit : 50));
  std::vector<v1::Job> jobs;
  for (const JobRecord& r : records) {
    ASSIGN_OR_RETURN(v1::Job job, GetJob(r.job_id));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

absl::StatusOr<std::vector<v1::Trial>> JobManager::ListTrials(const std::string& job_id) {
  uint64_t version = 0;
  ASSIGN_OR_RETURN(v1::JobEvent event, GetJobEvent(job_id, &version));
  return std::vector<v1::Trial>(event.trials().begin(), event.trials().end());
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

std::vector<v1::Worker> JobManager::ListWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Worker> out;
  for (const auto& [id, w] : workers_) {
    v1::Worker info = w.info;
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
          if (t->record.trial_id != trial_id || IsTerminal(t->record.status)) continue;
          // Every other rank is cancelled; the reason names the first rank lost.
          int lost_rank = 0;
          while (lost_rank + 1 < static_cast<int>(t->ranks.size()) &&
                 t->ranks[lost_rank].worker_id != id) {
            ++lost_rank;
          }
          const std::string reason =
              t->ranks.size() > 1
                  ? absl::StrCat(RankPrefix(t->ranks.size(), lost_rank, id),
                                 "worker lost (no heartbeat for ", silent, ")")
                  : absl::StrCat("worker ", id, " lost (no heartbeat for ", silent, ")");
          EndTrialLocked(job.get(), t.get(), TrialStatus::kFailed, reason, TrialMetrics(), cancels);
        }
      }
    }
  }
  for (const std::string& id : std::vector<std::string>(active_order_)) {
    JobRun* job = active_[id].get();
    const std::string& type = job->request.device_type();
    if (now >= job->record.deadline) {
      FinishJobLocked(job, JobState::kSucceeded, kTimeLimitReached, cancels);
      continue;
    }
    if (job->searcher && job->searcher->Finished() && job->running == 0) {
      const int max_trials = job->request.max_trials();
      int run = 0;
      for (const auto& t : job->trials) run += t->record.status != TrialStatus::kPruned;
      FinishJobLocked(job, JobState::kSucceeded,
                      max_trials > 0 && run >= max_trials ? "trial budget spent"
                      : job->record.trials_total == static_cast<int>(job->trials.size())
                          ? "every candidate measured or pruned"
                          : "search finished",
                      cancels);
      continue;
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
    DispatchLocked(job, dispatches);
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
  for (int port = w.info.rendezvous_port_min(); port > 0 && port <= w.info.rendezvous_port_max();
       ++port) {
    if (w.ports_held.count(port) == 0) return port;
  }
  return 0;
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

void JobManager::DispatchLocked(JobRun* job, std::vector<Dispatch>* dispatches) {
  const v1::TuneRequest& r = job->request;
  while (true) {
    int port = 0;
    std::vector<Rank> ranks = FindFreeDevicesLocked(r.device_type(), r.world_size(), &port);
    if (ranks.empty()) return;
    std::optional<Proposal> proposal = job->searcher->Next();
    if (!proposal) return;
    const Strategy* strategy = &proposal->strategy;
    auto trial = std::make_unique<TrialRun>();
    trial->strategy = *strategy;
    trial->ranks = ranks;
    trial->ranks_pending = static_cast<int>(ranks.size());
    trial->master_port = port;
    TrialRecord& rec = trial->record;
    rec.index = static_cast<int>(job->trials.size());
    rec.trial_id = absl::StrFormat("%s-t%04d", job->record.job_id, rec.index);
    rec.job_id = job->record.job_id;
    rec.attempt = 1;
    rec.strategy_text = StrategyToText(*strategy);
    rec.strategy_json = StrategyToJson(*strategy).dump();
    rec.status = TrialStatus::kRunning;
    rec.started_at = clock_->Now();
    std::vector<std::string> worker_ids;
    for (const Rank& rank : ranks) worker_ids.push_back(rank.worker_id);
    rec.worker_id = absl::StrJoin(worker_ids, ",");

    absl::Duration timeout = std::min(absl::Seconds(r.trial_timeout_seconds()),
                                      job->record.deadline - clock_->Now() + absl::Seconds(5));
    TrialSpec spec;
    spec.trial_id = rec.trial_id;
    spec.attempt = rec.attempt;
    spec.world_size = static_cast<int>(ranks.size());
    if (port > 0) {
      spec.master_addr = HostOfAddress(ranks[0].address);
      spec.master_port = port;
      workers_[ranks[0].worker_id].ports_held[port] = rec.trial_id;
    }
    spec.model = job->model;
    spec.seq_len = r.seq_len();
    spec.global_batch_size = r.global_batch_size();
    spec.strategy = *strategy;
    spec.warmup_steps = r.warmup_steps();
    spec.measured_steps =
        proposal->measured_steps > 0 ? proposal->measured_steps : r.measured_steps();
    for (size_t i = 0; i < ranks.size(); ++i) {
      workers_[ranks[i].worker_id].held_by[ranks[i].device_index] = rec.trial_id;
      holds_[{rec.trial_id, static_cast<int>(i)}] =
          RankHold{ranks[i].worker_id, ranks[i].device_index, i == 0 ? port : 0};
      spec.rank = static_cast<int>(i);
      spec.local_rank = ranks[i].local_rank;
      Dispatch d;
      d.address = ranks[i].address;
      d.request.set_trial_id(rec.trial_id);
      d.request.set_attempt(rec.attempt);
      d.request.set_device_index(ranks[i].device_index);
      d.request.set_spec_json(TrialSpecToJson(spec).dump());
      d.request.set_timeout_seconds(absl::ToDoubleSeconds(timeout));
      if (job->script) d.request.set_model_file(*job->script);
      d.rpc_timeout = timeout + options_.rpc_grace;
      d.job_id = job->record.job_id;
      d.trial_id = rec.trial_id;
      d.rank = static_cast<int>(i);
      dispatches->push_back(std::move(d));
    }
    spdlog::info("job {}: trial {} [{}] on {}{}", job->record.job_id, rec.index, rec.strategy_text,
                 rec.worker_id,
                 port > 0 ? absl::StrCat(" (rendezvous ", spec.master_addr, ":", port, ")") : "");
    ++job->running;
    TrialRun* raw = trial.get();
    job->trials.push_back(std::move(trial));
    PersistTrialLocked(job, raw);
  }
}

DeviceSpec JobManager::DeviceSpecLocked(const std::string& type) const {
  DeviceSpec device;
  device.type = type;
  bool first = true;
  for (const auto& [id, w] : workers_) {
    if (!w.healthy) continue;
    for (const v1::Device& d : w.info.devices()) {
      if (d.type() != type) continue;
      if (first) {
        device.peak = FromProto(d.peak_tflops());
        device.memory_bytes = d.memory_bytes();
        first = false;
      } else if (d.memory_bytes() > 0 &&
                 (device.memory_bytes == 0 || d.memory_bytes() < device.memory_bytes)) {
        device.memory_bytes = d.memory_bytes();
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
  setup.budget.deadline = job->record.deadline;
  setup.budget.max_trials = r.max_trials();
  setup.parallel_trials = std::max(1, pool / std::max(1, r.world_size()));
  setup.warmup_steps = r.warmup_steps();
  setup.measured_steps = r.measured_steps();
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
    auto trial = std::make_unique<TrialRun>();
    trial->strategy = p.strategy;
    TrialRecord& rec = trial->record;
    rec.index = static_cast<int>(job->trials.size());
    rec.trial_id = absl::StrFormat("%s-t%04d", job->record.job_id, rec.index);
    rec.job_id = job->record.job_id;
    rec.attempt = 0;  // never run
    rec.strategy_text = StrategyToText(p.strategy);
    rec.strategy_json = StrategyToJson(p.strategy).dump();
    rec.status = TrialStatus::kPruned;
    rec.reason = std::move(p.reason);
    rec.started_at = rec.finished_at = now;
    records.push_back(rec);
    job->trials.push_back(std::move(trial));
  }
  ++job->version;
  if (absl::Status s = store_->UpsertTrials(records); !s.ok()) {
    spdlog::error("job {}: storing {} pruned candidates failed: {}", job->record.job_id,
                  records.size(), s.ToString());
  }
  spdlog::info("job {}: pruned {} candidate(s), e.g. {}: {}", job->record.job_id, records.size(),
               records.front().strategy_text, records.front().reason);
}

void JobManager::ReleaseRankLocked(const std::string& trial_id, int rank) {
  auto hold = holds_.find({trial_id, rank});
  if (hold == holds_.end()) return;
  auto it = workers_.find(hold->second.worker_id);
  if (it != workers_.end()) {
    auto& held = it->second.held_by;
    const int device = hold->second.device_index;
    if (device >= 0 && device < static_cast<int>(held.size()) && held[device] == trial_id) {
      held[device].clear();
    }
    // The store lives in rank 0's process: its port is free once it answered.
    auto port = it->second.ports_held.find(hold->second.port);
    if (port != it->second.ports_held.end() && port->second == trial_id) {
      it->second.ports_held.erase(port);
    }
  }
  holds_.erase(hold);
}

void JobManager::OnRankDone(const std::string& job_id, const std::string& trial_id, int rank_index,
                            absl::Status status, v1::RunTrialResponse response) {
  std::vector<Cancel> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --rpcs_in_flight_;
    // Whatever became of the trial (or its job), this rank's device is free.
    ReleaseRankLocked(trial_id, rank_index);
    auto job_it = active_.find(job_id);
    TrialRun* trial = nullptr;
    if (job_it != active_.end()) {
      for (auto& t : job_it->second->trials) {
        if (t->record.trial_id == trial_id) trial = t.get();
      }
    }
    if (trial != nullptr && rank_index >= 0 && rank_index < static_cast<int>(trial->ranks.size())) {
      Rank& rank = trial->ranks[rank_index];
      if (!rank.finished) {
        rank.finished = true;
        --trial->ranks_pending;
      }
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
      // The first rank to fail ends the trial and names itself; the others
      // (cancelled, or failing because a peer went away) change nothing.
      const std::string prefix = RankPrefix(trial->ranks.size(), rank_index, rank.worker_id);
      if (clock_->Now() >= job->record.deadline) {
        // The answer came after the time limit: the trial was still running
        // then, so the job ends now, as the scheduler would have ended it,
        // and the trial is recorded CANCELLED. `job` and `trial` are gone.
        FinishJobLocked(job, JobState::kSucceeded, kTimeLimitReached, &cancels);
      } else if (!IsTerminal(trial->record.status)) {
        if (!status.ok()) {
          const bool timed_out = status.code() == absl::StatusCode::kDeadlineExceeded;
          std::string reason =
              !prefix.empty() ? absl::StrCat(prefix, timed_out ? "no answer before the deadline"
                                                               : std::string(status.message()))
              : timed_out
                  ? absl::StrCat("no answer from worker ", rank.worker_id, " before the deadline")
                  : absl::StrCat("worker ", rank.worker_id, ": ", status.message());
          EndTrialLocked(job, trial, timed_out ? TrialStatus::kTimeout : TrialStatus::kFailed,
                         reason, TrialMetrics(), &cancels);
        } else {
          absl::StatusOr<TrialStatus> rank_status = ParseTrialStatus(response.status());
          TrialStatus st = rank_status.ok() ? *rank_status : TrialStatus::kFailed;
          if (st != TrialStatus::kSucceeded) {
            EndTrialLocked(job, trial, st,
                           absl::StrCat(prefix, rank_status.ok() ? response.reason()
                                                                 : "worker answered an unknown "
                                                                   "status: " +
                                                                       response.status()),
                           FromProto(response.metrics()), &cancels);
          } else {
            rank.metrics = FromProto(response.metrics());
            if (trial->ranks_pending == 0) {
              EndTrialLocked(job, trial, TrialStatus::kSucceeded, "", GangMetrics(*trial),
                             &cancels);
            }
          }
        }
      }
    }
  }
  cv_.notify_all();
  SendAll({}, std::move(cancels));
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
  rec.status = status;
  rec.reason = reason;
  rec.metrics = metrics;
  rec.finished_at = clock_->Now();
  --job->running;
  if (status != TrialStatus::kSucceeded) {
    // One CancelTrial per worker stops all of the trial's ranks there.
    std::set<std::string> told;
    for (Rank& rank : trial->ranks) {
      if (rank.finished || !told.insert(rank.address).second) continue;
      Cancel c;
      c.address = rank.address;
      c.request.set_trial_id(rec.trial_id);
      c.request.set_attempt(rec.attempt);
      cancels->push_back(std::move(c));
    }
  }
  ScoredTrial scored;
  scored.strategy = trial->strategy;
  scored.status = status;
  scored.metrics = metrics;
  job->searcher->Report(scored);
  RecordPrunedLocked(job);
  if (status == TrialStatus::kSucceeded) {
    std::optional<ScoredTrial> best = job->searcher->Best();
    if (best && best->strategy == trial->strategy) job->record.best_trial_id = rec.trial_id;
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
  const TrialRun* best = nullptr;
  for (const auto& t : job->trials) {
    if (t->record.trial_id == rec.best_trial_id) best = t.get();
  }
  if (state == JobState::kSucceeded && best == nullptr) {
    std::map<std::string, int> counts;
    for (const auto& t : job->trials) counts[std::string(TrialStatusName(t->record.status))]++;
    std::vector<std::string> parts;
    for (const auto& [name, n] : counts) parts.push_back(absl::StrCat(n, " ", name));
    state = JobState::kFailed;
    rec.status_message =
        absl::StrCat(message, "; no trial succeeded",
                     parts.empty() ? std::string(" (no trial ran)")
                                   : absl::StrCat(" (", absl::StrJoin(parts, ", "), ")"));
  } else if (best != nullptr) {
    int run = 0, pruned = 0;
    for (const auto& t : job->trials) ++(t->record.status == TrialStatus::kPruned ? pruned : run);
    rec.status_message =
        absl::StrFormat("%s; best %s at %.0f tokens/s after %d trial(s)%s", message,
                        best->record.strategy_text, best->record.metrics.tokens_per_second, run,
                        pruned > 0 ? absl::StrFormat(" (%d candidate(s) pruned)", pruned) : "");
  } else {
    rec.status_message = message;
  }
  rec.state = state;
  if (state == JobState::kSucceeded && best != nullptr) {
    StrategyRecord s;
    s.signature = rec.signature;
    s.model_family = job->model.family;
    s.model_config_json = job->model.ToConfigJson().dump();
    s.seq_len = job->request.seq_len();
    s.global_batch_size = job->request.global_batch_size();
    s.hardware = HardwareName(job->request.device_type(), job->request.world_size());
    s.strategy_text = best->record.strategy_text;
    s.strategy_json = best->record.strategy_json;
    s.metrics = best->record.metrics;
    s.job_id = rec.job_id;
    s.updated_at = rec.finished_at;
    // Keep a faster answer found earlier for the same signature.
    absl::StatusOr<std::optional<StrategyRecord>> old = store_->GetStrategy(rec.signature);
    if (!old.ok() || !old->has_value() ||
        (*old)->metrics.tokens_per_second <= s.metrics.tokens_per_second) {
      best_record = std::move(s);
    }
  }
  if (absl::Status s = store_->FinishJob(rec, best_record); !s.ok()) {
    spdlog::error("job {}: storing the result failed: {}", rec.job_id, s.ToString());
  }
  spdlog::info("job {}: {} — {}", rec.job_id, std::string(JobStateName(state)), rec.status_message);
  active_order_.erase(std::find(active_order_.begin(), active_order_.end(), rec.job_id));
  active_.erase(rec.job_id);  // `job` is gone after this line
}

void JobManager::PersistJobLocked(JobRun* job) {
  ++job->version;
  if (absl::Status s = store_->UpdateJob(job->record); !s.ok()) {
    spdlog::error("job {}: store update failed: {}", job->record.job_id, s.ToString());
  }
}

void JobManager::PersistTrialLocked(JobRun* job, TrialRun* trial) {
  ++job->version;
  if (absl::Status s = store_->UpsertTrial(trial->record); !s.ok()) {
    spdlog::error("trial {}: store update failed: {}", trial->record.trial_id, s.ToString());
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
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("job-%s-%04x",
                         absl::FormatTime("%Y%m%d-%H%M%S", clock_->Now(), absl::UTCTimeZone()),
                         static_cast<unsigned>((rng() ^ ++job_counter_) & 0xffff));
}

}  // namespace autoaccel
