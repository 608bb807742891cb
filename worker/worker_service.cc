#include "worker/worker_service.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/grpc_status.h"
#include "proto/convert.h"

namespace autoaccel {
namespace {

std::string Key(const std::string& trial_id, int attempt) {
  return absl::StrCat(trial_id, "/", attempt);
}

}  // namespace

absl::StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text,
                                                     int64_t memory_bytes) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--devices: expected cpu:N (N CPU slots) or cuda:0,1,... — got '", text, "'"));
  };
  std::pair<std::string, std::string> kv = absl::StrSplit(text, absl::MaxSplits(':', 1));
  std::vector<v1::Device> devices;
  if (kv.first == "cpu") {
    int n = 0;
    if (!absl::SimpleAtoi(kv.second, &n) || n <= 0 || n > 1024) return bad();
    int64_t per_slot = memory_bytes;
    if (per_slot <= 0) {
      per_slot = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / n;
    }
    for (int i = 0; i < n; ++i) {
      v1::Device d;
      d.set_type("cpu");
      d.set_index(i);
      d.set_memory_bytes(per_slot);
      d.set_name("cpu");
      devices.push_back(d);
    }
  } else if (kv.first == "cuda") {
    for (absl::string_view part : absl::StrSplit(kv.second, ',')) {
      int index = 0;
      if (!absl::SimpleAtoi(part, &index) || index < 0) return bad();
      v1::Device d;
      d.set_type("cuda");
      d.set_index(static_cast<int>(devices.size()));
      d.set_memory_bytes(memory_bytes);
      d.set_name(absl::StrCat("cuda:", index));
      devices.push_back(d);
    }
  } else {
    return bad();
  }
  if (devices.empty()) return bad();
  return devices;
}

WorkerServiceImpl::~WorkerServiceImpl() { Shutdown(); }

void WorkerServiceImpl::Shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  shutting_down_ = true;
  for (auto& [key, execution] : running_) execution->cancel = true;
  idle_cv_.wait(lock, [this] { return threads_ == 0; });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RunTrial(grpc::CallbackServerContext* ctx,
                                                      const v1::RunTrialRequest* request,
                                                      v1::RunTrialResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto fail = [&](absl::Status s) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  };
  const int index = request->device_index();
  if (index < 0 || index >= static_cast<int>(options_.devices.size())) {
    return fail(absl::InvalidArgumentError(absl::StrCat("device_index: ", index,
                                                        " out of range (this worker has ",
                                                        options_.devices.size(), " devices)")));
  }
  nlohmann::json j = nlohmann::json::parse(request->spec_json(), nullptr, false);
  if (j.is_discarded()) return fail(absl::InvalidArgumentError("spec_json: not valid JSON"));
  absl::StatusOr<TrialSpec> spec = TrialSpecFromJson(j);
  if (!spec.ok()) return fail(spec.status());
  if (request->trial_id().empty()) return fail(absl::InvalidArgumentError("trial_id: missing"));
  spec->trial_id = request->trial_id();
  spec->attempt = request->attempt();
  const v1::Device& device = options_.devices[index];
  spec->device = device.type() == "cpu" ? "cpu" : device.name();
  spec->num_threads = options_.threads_per_device;
  if (spec->memory_limit_bytes <= 0) spec->memory_limit_bytes = device.memory_bytes();
  absl::Duration timeout = request->timeout_seconds() > 0
                               ? absl::Seconds(request->timeout_seconds())
                               : absl::Minutes(10);

  const std::string key = Key(request->trial_id(), request->attempt());
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return fail(absl::UnavailableError("worker is shutting down"));
  auto it = running_.find(key);
  if (it != running_.end()) {  // a retried call: attach to the running child
    it->second->waiters.push_back({ctx, reactor, response});
    return reactor;
  }
  auto execution = std::make_shared<Execution>();
  execution->waiters.push_back({ctx, reactor, response});
  running_[key] = execution;
  ++threads_;
  spdlog::info("trial {} rank {}: starting on {} ({})", spec->trial_id, spec->rank, spec->device,
               StrategyToText(spec->strategy));
  std::thread(&WorkerServiceImpl::RunExecution, this, key, *spec, timeout).detach();
  return reactor;
}

void WorkerServiceImpl::RunExecution(std::string key, TrialSpec spec, absl::Duration timeout) {
  std::shared_ptr<Execution> execution;
  {
    std::lock_guard<std::mutex> lock(mu_);
    execution = running_[key];
  }
  TrialProcessOptions options;
  options.runner_path = options_.runner_path;
  options.work_dir = options_.work_dir;
  options.timeout = timeout;
  options.should_cancel = [this, execution] {
    if (execution->cancel) return true;
    // Stop when every caller is gone: nobody would read the result.
    std::lock_guard<std::mutex> lock(mu_);
    for (const Waiter& w : execution->waiters) {
      if (!w.ctx->IsCancelled()) return false;
    }
    return true;
  };
  TrialResult result = RunTrialProcess(spec, options);
  spdlog::info("trial {} rank {}: {} {}", spec.trial_id, spec.rank,
               std::string(TrialStatusName(result.status)), result.error);

  std::lock_guard<std::mutex> lock(mu_);
  for (const Waiter& w : execution->waiters) {
    w.response->set_status(std::string(TrialStatusName(result.status)));
    w.response->set_reason(result.error);
    *w.response->mutable_metrics() = ToProto(result.metrics);
    w.reactor->Finish(grpc::Status::OK);
  }
  running_.erase(key);
  if (--threads_ == 0) idle_cv_.notify_all();
}

grpc::ServerUnaryReactor* WorkerServiceImpl::CancelTrial(grpc::CallbackServerContext* ctx,
                                                         const v1::CancelTrialRequest* request,
                                                         v1::CancelTrialResponse*) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(Key(request->trial_id(), request->attempt()));
    if (it != running_.end()) {
      spdlog::info("trial {}: cancel requested", request->trial_id());
      it->second->cancel = true;
    }
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace autoaccel
