#include "worker/worker_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/json_log.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "worker/accelerators.h"
#include "worker/file_names.h"
#include "worker/model_file_cache.h"
#include "worker/rank_logs.h"
#include "worker/rank_spec.h"
#include "worker/trial_process.h"

namespace autoaccel {

WorkerServiceImpl::~WorkerServiceImpl() { Shutdown(); }

void WorkerServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  for (auto& [key, execution] : running_) execution->cancel = true;
  mu_.Await(absl::Condition(
      +[](int* threads) { return *threads == 0; }, &threads_));
}

void WorkerServiceImpl::Answer(const Waiter& waiter, const v1::RunTrialResponse& answer) {
  absl::Status serialized = SerializeMessage(answer, waiter.response);
  waiter.reactor->Finish(ToGrpcStatus(serialized));
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RunTrial(grpc::CallbackServerContext* ctx,
                                                      const grpc::ByteBuffer* in,
                                                      grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto fail = [&](absl::Status s) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  };
  if (absl::Status allowed = gate_.Check(*ctx); !allowed.ok()) return fail(allowed);
  v1::RunTrialRequest request;
  if (absl::Status s = ParseRequest(*in, &request); !s.ok()) return fail(s);
  if (request.attach_only()) {
    absl::MutexLock lock(&mu_);
    if (absl::Status attached = AttachLocked(request, {ctx, reactor, response}); !attached.ok()) {
      return fail(attached);
    }
    return reactor;
  }
  const int index = request.device_index();
  if (index < 0 || index >= static_cast<int>(options_.devices.size())) {
    return fail(absl::InvalidArgumentError(absl::StrCat("device_index: ", index,
                                                        " out of range (this worker has ",
                                                        options_.devices.size(), " devices)")));
  }
  RankDevice device;
  {
    absl::MutexLock lock(&mu_);
    device.device = devices_[index];
  }
  device.runner_device = RunnerDevice(device.device);
  device.num_threads = options_.threads_per_device;
  absl::StatusOr<TrialSpec> spec = RankSpecFromRequest(request, device);
  if (!spec.ok()) return fail(spec.status());
  std::shared_ptr<const LauncherRank> launcher;
  if (!request.launcher().empty()) {
    absl::StatusOr<std::shared_ptr<const LauncherRank>> rank =
        LauncherRankFor(request, device, *spec);
    if (!rank.ok()) return fail(rank.status());
    launcher = *rank;
  } else if (options_.runner_path.empty()) {
    return fail(absl::FailedPreconditionError(
        "this worker has no trial runner (autoaccel-trial): it runs launcher trials only"));
  } else if (device.device.type() != "cpu" && device.device.type() != "cuda") {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("device ", index, " is a ", device.device.type(),
                     " device: only launcher trials run there (the engine runs on cpu and cuda)")));
  }
  if (launcher == nullptr && spec->model.IsTorchScript()) {
    if (request.model_file().empty()) {  // the file comes apart (StoreModelFile)
      absl::StatusOr<std::optional<std::string>> held =
          FindModelFile(options_.work_dir, spec->model.script_digest);
      if (!held.ok()) return fail(held.status());
      if (!*held) {
        v1::RunTrialResponse missing;
        missing.set_model_file_missing(true);
        Answer({ctx, reactor, response}, missing);
        return reactor;
      }
      spec->model_file = **held;
    } else {
      absl::StatusOr<std::string> path = autoaccel::StoreModelFile(
          options_.work_dir, spec->model.script_digest, request.model_file(),
          RankFileStem(spec->trial_id, spec->attempt, spec->rank));
      if (!path.ok()) return fail(path.status());
      spec->model_file = *path;
    }
  }
  const absl::Duration timeout = request.timeout_seconds() > 0
                                     ? absl::Seconds(request.timeout_seconds())
                                     : kDefaultTrialTimeout;

  const ExecutionKey key{request.trial_id(), request.attempt(), spec->rank};
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return fail(absl::UnavailableError("worker is shutting down"));
  auto it = running_.find(key);
  if (it != running_.end()) {  // a retried call for this rank: attach to its child
    it->second->waiters.push_back({ctx, reactor, response});
    it->second->orphaned_since = absl::InfiniteFuture();
    return reactor;
  }
  DropExpiredAnswersLocked();
  if (auto kept = kept_.find(key); kept != kept_.end()) {  // it ended meanwhile
    Answer({ctx, reactor, response}, kept->second.response);
    kept_.erase(kept);
    return reactor;
  }
  for (const auto& [other, e] : running_) {
    if (e->device_index == index) {
      return fail(absl::ResourceExhaustedError(
          absl::StrCat("device_index: device ", index, " is running trial ", std::get<0>(other),
                       " rank ", std::get<2>(other), "; one rank per device")));
    }
  }
  auto execution = std::make_shared<Execution>();
  execution->device_index = index;
  if (spec->rank == 0 && spec->world_size > 1) execution->rendezvous_port = spec->master_port;
  execution->waiters.push_back({ctx, reactor, response});
  running_[key] = execution;
  ++threads_;
  const LogContext context("", spec->trial_id, spec->rank);
  spdlog::info("trial {} rank {}: starting on {}{} ({})", spec->trial_id, spec->rank, spec->device,
               launcher ? absl::StrCat(" with launcher ", launcher->launcher.name) : "",
               StrategyToText(spec->strategy));
  std::thread(&WorkerServiceImpl::RunExecution, this, key, index, *spec, timeout, launcher)
      .detach();
  return reactor;
}

absl::Status WorkerServiceImpl::AttachLocked(const v1::RunTrialRequest& request,
                                             const Waiter& waiter) {
  const auto same = [&request](const ExecutionKey& key, int device_index) {
    return std::get<0>(key) == request.trial_id() && std::get<1>(key) == request.attempt() &&
           device_index == request.device_index();
  };
  for (auto& [key, execution] : running_) {
    if (!same(key, execution->device_index)) continue;
    execution->waiters.push_back(waiter);
    execution->orphaned_since = absl::InfiniteFuture();
    spdlog::info("trial {} rank {}: the coordinator attached again", std::get<0>(key),
                 std::get<2>(key));
    return absl::OkStatus();
  }
  DropExpiredAnswersLocked();
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (!same(it->first, it->second.device_index)) continue;
    spdlog::info("trial {} rank {}: the coordinator collected its answer", std::get<0>(it->first),
                 std::get<2>(it->first));
    Answer(waiter, it->second.response);
    kept_.erase(it);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("trial ", request.trial_id(), " attempt ",
                                          request.attempt(), " runs on no device ",
                                          request.device_index(), " of this worker"));
}

void WorkerServiceImpl::DropExpiredAnswersLocked() {
  const absl::Time now = absl::Now();
  for (auto it = kept_.begin(); it != kept_.end();) {
    it = it->second.until <= now ? kept_.erase(it) : std::next(it);
  }
}

std::vector<v1::RunningRank> WorkerServiceImpl::RunningRanks() {
  absl::MutexLock lock(&mu_);
  DropExpiredAnswersLocked();
  std::vector<v1::RunningRank> out;
  const auto add = [&out](const ExecutionKey& key, int device_index, bool finished,
                          int rendezvous_port) {
    v1::RunningRank r;
    r.set_trial_id(std::get<0>(key));
    r.set_attempt(std::get<1>(key));
    r.set_rank(std::get<2>(key));
    r.set_device_index(device_index);
    r.set_finished(finished);
    r.set_rendezvous_port(rendezvous_port);
    out.push_back(std::move(r));
  };
  for (const auto& [key, execution] : running_) {
    if (!execution->cancel) {
      add(key, execution->device_index, false, execution->rendezvous_port);
    }
  }
  // A finished rank 0 serves no rendezvous any more.
  for (const auto& [key, kept] : kept_) add(key, kept.device_index, true, 0);
  return out;
}

absl::StatusOr<std::shared_ptr<const LauncherRank>> WorkerServiceImpl::LauncherRankFor(
    const v1::RunTrialRequest& request, const RankDevice& device, const TrialSpec& spec) const {
  auto it = options_.launchers.find(request.launcher());
  if (it == options_.launchers.end()) {
    std::vector<std::string> names;
    for (const auto& [name, def] : options_.launchers) names.push_back(name);
    return absl::FailedPreconditionError(
        absl::StrCat("this worker has no launcher '", request.launcher(),
                     "' (it has: ", names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  auto rank = std::make_shared<LauncherRank>();
  rank->spec = spec;
  rank->launcher = it->second;
  rank->device_type = device.device.type();
  // The rank's neighbours here, as the coordinator placed them; a spec
  // without them (written by hand) has the rank alone on this worker.
  std::vector<int> indices = spec.local_device_indices;
  if (indices.empty()) indices.push_back(request.device_index());
  const int local_rank = spec.local_device_indices.empty() ? 0 : spec.local_rank;
  const int num_devices = static_cast<int>(options_.devices.size());
  for (int index : indices) {
    if (index < 0 || index >= num_devices) {
      return absl::InvalidArgumentError(absl::StrCat("local_device_indices: ", index,
                                                     " out of range (this worker has ", num_devices,
                                                     " devices)"));
    }
  }
  if (indices[local_rank] != request.device_index()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local_device_indices: [", absl::StrJoin(indices, ","), "] does not hold device_index ",
        request.device_index(), " at local_rank ", spec.local_rank));
  }
  for (int index : indices) rank->device_ordinals.push_back(options_.devices[index].ordinal());
  return std::shared_ptr<const LauncherRank>(std::move(rank));
}

void WorkerServiceImpl::RunExecution(ExecutionKey key, int device_index, TrialSpec spec,
                                     absl::Duration timeout,
                                     std::shared_ptr<const LauncherRank> launcher) {
  const LogContext context("", spec.trial_id, spec.rank);
  std::shared_ptr<Execution> execution;
  {
    absl::MutexLock lock(&mu_);
    execution = running_[key];
  }
  auto should_cancel = [this, execution, &spec] {
    if (execution->cancel) return true;
    // Stop when every caller has been gone for the reattach window: no
    // coordinator came back to read the result.
    absl::MutexLock lock(&mu_);
    for (const Waiter& w : execution->waiters) {
      if (!w.ctx->IsCancelled()) return false;
    }
    const absl::Time now = absl::Now();
    if (execution->orphaned_since == absl::InfiniteFuture()) {
      execution->orphaned_since = now;
      if (options_.reattach_window > absl::ZeroDuration()) {
        spdlog::warn(
            "trial {} rank {}: its coordinator went away; the rank keeps running for {} "
            "for it to attach again",
            spec.trial_id, spec.rank, absl::FormatDuration(options_.reattach_window));
      }
    }
    return now - execution->orphaned_since >= options_.reattach_window;
  };
  TrialResult result;
  if (launcher != nullptr) {
    LauncherTrialOptions options;
    options.work_dir = options_.work_dir;
    options.python = options_.python;
    options.timeout = timeout;
    options.grace = options_.launcher_grace;
    options.sandbox = options_.sandbox.get();
    options.rank_env = &options_.rank_env;
    options.cache = options_.launcher_cache;
    options.should_cancel = should_cancel;
    result = RunLauncherRank(*launcher, options);
    // Not RaisePeakIfBeaten: a script's tokens are its own claim, no proof
    // that the probe under-measured the device.
  } else {
    TrialProcessOptions options;
    options.runner_path = options_.runner_path;
    options.work_dir = options_.work_dir;
    options.timeout = timeout;
    options.sandbox = options_.sandbox.get();
    options.rank_env = &options_.rank_env;
    options.should_cancel = should_cancel;
    result = RunTrialProcess(spec, options);
    RaisePeakIfBeaten(device_index, spec, &result);
  }
  spdlog::info("trial {} rank {}: {} {}", spec.trial_id, spec.rank,
               std::string(TrialStatusName(result.status)), result.error);
  if (options_.trial_dirs) {
    const bool failed =
        result.status != TrialStatus::kSucceeded && result.status != TrialStatus::kCancelled;
    options_.trial_dirs->Finished(launcher != nullptr
                                      ? LauncherTrialDir(*launcher, options_.work_dir)
                                      : TrialProcessDir(spec, options_.work_dir),
                                  failed, absl::Now());
  }

  v1::RunTrialResponse answer;
  answer.set_status(ToProto(result.status));
  answer.set_reason(result.error);
  answer.set_infrastructure(result.infrastructure);
  *answer.mutable_metrics() = ToProto(result.metrics);
  absl::MutexLock lock(&mu_);
  bool read = false;
  for (const Waiter& w : execution->waiters) {
    read = read || !w.ctx->IsCancelled();
    Answer(w, answer);
  }
  // Nobody waited: kept for a coordinator that comes back (not for a rank
  // it cancelled, nor after the window it was given).
  if (!read && !execution->cancel && options_.reattach_window > absl::ZeroDuration() &&
      result.status != TrialStatus::kCancelled) {
    kept_[key] =
        KeptAnswer{device_index, std::move(answer), absl::Now() + options_.reattach_window};
  }
  running_.erase(key);
  --threads_;  // Shutdown awaits 0
}

void WorkerServiceImpl::RaisePeakIfBeaten(int device_index, const TrialSpec& spec,
                                          TrialResult* result) {
  TrialMetrics& m = result->metrics;
  if (!options_.cpu_peaks_measured || result->status != TrialStatus::kSucceeded || !(m.mfu > 1.0) ||
      !(m.peak_tflops > 0) || spec.world_size < 1) {
    return;
  }
  const double achieved_per_device = m.achieved_tflops / spec.world_size;
  std::vector<v1::Device> devices;
  {
    absl::MutexLock lock(&mu_);
    if (devices_[device_index].type() != "cpu") return;
    for (v1::Device& d : devices_) {
      if (d.type() != "cpu") continue;
      PeakTflops peak = FromProto(d.peak_tflops());
      double& at = peak.*PeakTflops::MemberFor(spec.strategy.precision);
      at = std::max(at, achieved_per_device);
      *d.mutable_peak_tflops() = ToProto(peak);
    }
    devices = devices_;
  }
  spdlog::warn(
      "trial {} rank {} computed {:.4g} TFLOP/s per device, above the probed peak ({:.4g}): the "
      "probe under-measured it; the cpu devices' {} peak is now {:.4g} TFLOP/s",
      spec.trial_id, spec.rank, achieved_per_device, m.peak_tflops / spec.world_size,
      std::string(PrecisionName(spec.strategy.precision)), achieved_per_device);
  m.peak_tflops = achieved_per_device * spec.world_size;
  m.mfu = m.achieved_tflops / m.peak_tflops;
  if (options_.on_devices_changed) options_.on_devices_changed(devices);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::CancelTrial(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* in,
                                                         grpc::ByteBuffer* out) {
  return ParsedUnary<v1::CancelTrialRequest, v1::CancelTrialResponse>(
      ctx, in, out, [&](const v1::CancelTrialRequest& request, v1::CancelTrialResponse*) {
        RETURN_IF_ERROR(gate_.Check(*ctx));
        // Every rank of the trial's attempt on this worker.
        absl::MutexLock lock(&mu_);
        for (auto it = running_.lower_bound(ExecutionKey{request.trial_id(), request.attempt(),
                                                         std::numeric_limits<int>::min()});
             it != running_.end() && std::get<0>(it->first) == request.trial_id() &&
             std::get<1>(it->first) == request.attempt();
             ++it) {
          spdlog::info("trial {} rank {}: cancel requested", request.trial_id(),
                       std::get<2>(it->first));
          it->second->cancel = true;
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::StoreModelFile(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* in,
                                                            grpc::ByteBuffer* out) {
  return ParsedUnary<v1::StoreModelFileRequest, v1::StoreModelFileResponse>(
      ctx, in, out,
      [&](const v1::StoreModelFileRequest& request, v1::StoreModelFileResponse*) -> absl::Status {
        RETURN_IF_ERROR(gate_.Check(*ctx));
        const uint64_t writer = model_file_writers_.fetch_add(1);
        return autoaccel::StoreModelFile(options_.work_dir, request.digest(), request.model_file(),
                                         absl::StrCat("push-", writer))
            .status();
      });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReadRankLogs(grpc::CallbackServerContext* ctx,
                                                          const grpc::ByteBuffer* in,
                                                          grpc::ByteBuffer* out) {
  return ParsedUnary<v1::ReadRankLogsRequest, v1::RankLogs>(
      ctx, in, out, [&](const v1::ReadRankLogsRequest& request, v1::RankLogs* response) {
        RETURN_IF_ERROR(gate_.Check(*ctx));
        bool running = false;
        {
          absl::MutexLock lock(&mu_);
          running =
              running_.count(ExecutionKey{request.trial_id(), request.attempt(), request.rank()});
        }
        ASSIGN_OR_RETURN(*response, autoaccel::ReadRankLogs(options_.work_dir, request, running));
        return absl::OkStatus();
      });
}

}  // namespace autoaccel
