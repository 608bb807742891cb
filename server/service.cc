#include "server/service.h"

#include <grpcpp/alarm.h>

#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "common/grpc_status.h"
#include "common/job_state.h"
#include "common/status_macros.h"
#include "export/export_json.h"
#include "offline/estimate_report.h"
#include "offline/export_request.h"
#include "server/job_view.h"
#include "server/request_limits.h"
#include "server/strategy_queries.h"

namespace autoaccel {
namespace {

// `answer`'s value in `*response`, or its error.
template <typename T>
absl::Status Respond(absl::StatusOr<T> answer, T* response) {
  if (answer.ok()) *response = std::move(*answer);
  return answer.status();
}

// Each element of `answer` added to the response's repeated field by `add`
// (e.g. &v1::ListJobsResponse::add_jobs), or its error.
template <typename T, typename Response, typename Add>
absl::Status RespondList(absl::StatusOr<std::vector<T>> answer, Response* response, Add add) {
  if (answer.ok()) {
    for (T& item : *answer) *(response->*add)() = std::move(item);
  }
  return answer.status();
}

// Streams a job: its state and every trial so far at once, then the job and
// the trials that changed whenever the job's version changes (polled every
// kPollInterval with a gRPC alarm, so no thread waits), and a last event when the
// job ends; a long list of trials goes out over several events. Finish() is only ever called when
// neither a write nor an alarm is pending, so OnDone (which deletes this) comes last.
class JobWatcher : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `on_done` runs once the stream has ended (releases the caller's slot).
  JobWatcher(JobManager* manager, std::string job_id, bool include_pruned,
             std::function<void()> on_done)
      : manager_(manager),
        job_id_(std::move(job_id)),
        include_pruned_(include_pruned),
        on_done_(std::move(on_done)) {
    Poll();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away"));
    } else if (!pending_.empty()) {
      WriteNext();
    } else if (ended_) {
      Finish(grpc::Status::OK);
    } else {
      Wait();
    }
  }
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override {
    if (on_done_) on_done_();
    delete this;
  }

 private:
  void Poll() {
    if (cancelled_) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
      return;
    }
    uint64_t version = 0;
    absl::StatusOr<v1::JobEvent> event =
        manager_->GetJobEvent(job_id_, last_version_, include_pruned_, &version);
    if (!event.ok()) {
      Finish(ToGrpcStatus(event.status()));
      return;
    }
    if (version == last_version_) {
      Wait();
      return;
    }
    last_version_ = version;
    job_ = std::move(*event->mutable_job());
    ended_ = IsTerminalJobStateName(job_.state());
    pending_.assign(std::make_move_iterator(event->mutable_trials()->begin()),
                    std::make_move_iterator(event->mutable_trials()->end()));
    next_ = 0;
    WriteNext();
  }
  // The job with the next chunk of changed trials (at least one event per
  // poll that saw a change, even with no trial in it).
  void WriteNext() {
    event_.Clear();
    *event_.mutable_job() = job_;
    for (size_t n = TrialsInNextEvent(pending_, next_, kTrialsPerEvent, kMaxTrialBytesPerMessage);
         n > 0; --n) {
      *event_.add_trials() = std::move(pending_[next_++]);
    }
    if (next_ == pending_.size()) pending_.clear();
    if (absl::Status s = SerializeMessage(event_, &wire_); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    StartWrite(&wire_);
  }
  static constexpr size_t kTrialsPerEvent = 2000;
  static constexpr std::chrono::milliseconds kPollInterval{200};
  void Wait() {
    alarm_.Set(std::chrono::system_clock::now() + kPollInterval, [this](bool) { Poll(); });
  }

  JobManager* const manager_;
  const std::string job_id_;
  const bool include_pruned_;
  const std::function<void()> on_done_;
  grpc::Alarm alarm_;
  v1::Job job_;
  std::vector<v1::Trial> pending_;  // changed trials not yet written
  size_t next_ = 0;
  v1::JobEvent event_;
  grpc::ByteBuffer wire_;  // event_ as written
  uint64_t last_version_ = 0;
  bool ended_ = false;
  std::atomic<bool> cancelled_{false};
};

// A stream refused before its first message: finishes with `status`.
class RefusedStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RefusedStream(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

absl::StatusOr<Caller> TuningServiceImpl::JobCaller(grpc::CallbackServerContext* ctx,
                                                    const std::string& job_id) {
  ASSIGN_OR_RETURN(Caller caller, auth_->User(*ctx));
  RETURN_IF_ERROR(
      MayReadJob(caller, job_id, [this](const std::string& id) { return manager_->JobOwner(id); }));
  return caller;
}

grpc::ServerUnaryReactor* TuningServiceImpl::SubmitJob(grpc::CallbackServerContext* ctx,
                                                       const Raw* in, Raw* out) {
  return AdmittedUnary<v1::SubmitJobRequest, v1::Job>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](v1::SubmitJobRequest& request, v1::Job* response) -> absl::Status {
        ASSIGN_OR_RETURN(const Caller caller, auth_->User(*ctx));
        // Moved, not copied: it may carry a TorchScript file of 512 MiB.
        return Respond(manager_->SubmitJob(std::move(*request.mutable_request()), caller.user),
                       response);
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::GetJob(grpc::CallbackServerContext* ctx, const Raw* in,
                                                    Raw* out) {
  return AdmittedUnary<v1::GetJobRequest, v1::Job>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::GetJobRequest& request, v1::Job* response) -> absl::Status {
        RETURN_IF_ERROR(JobCaller(ctx, request.job_id()).status());
        return Respond(manager_->GetJob(request.job_id()), response);
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TuningServiceImpl::WatchJob(
    grpc::CallbackServerContext* ctx, const Raw* in) {
  if (absl::Status admitted = auth_->User(*ctx).status(); !admitted.ok()) {
    return new RefusedStream(admitted);  // before parsing, as AdmittedUnary
  }
  v1::WatchJobRequest request;
  if (absl::Status parsed = ParseRequest(*in, &request); !parsed.ok()) {
    return new RefusedStream(parsed);
  }
  return Watch(ctx, request);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TuningServiceImpl::Watch(
    grpc::CallbackServerContext* ctx, const v1::WatchJobRequest& request) {
  absl::StatusOr<Caller> caller = JobCaller(ctx, request.job_id());
  if (!caller.ok()) return new RefusedStream(caller.status());
  std::function<void()> release;
  if (!caller->user.empty()) {  // per-user bounds need users
    absl::MutexLock lock(&watch_mu_);
    int& open = watches_[caller->user];
    if (absl::Status s = CheckLimit(Limit::kWatchStreamsPerUser, open + 1); !s.ok()) {
      return new RefusedStream(s);
    }
    ++open;
    release = [this, user = caller->user] {
      absl::MutexLock lock(&watch_mu_);
      if (--watches_[user] <= 0) watches_.erase(user);
    };
  }
  return new JobWatcher(manager_, request.job_id(), request.include_pruned(), std::move(release));
}

grpc::ServerUnaryReactor* TuningServiceImpl::CancelJob(grpc::CallbackServerContext* ctx,
                                                       const Raw* in, Raw* out) {
  return AdmittedUnary<v1::CancelJobRequest, v1::Job>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::CancelJobRequest& request, v1::Job* response) -> absl::Status {
        RETURN_IF_ERROR(JobCaller(ctx, request.job_id()).status());
        return Respond(manager_->CancelJob(request.job_id()), response);
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::ListJobs(grpc::CallbackServerContext* ctx,
                                                      const Raw* in, Raw* out) {
  return AdmittedUnary<v1::ListJobsRequest, v1::ListJobsResponse>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::ListJobsRequest& request, v1::ListJobsResponse* response) -> absl::Status {
        ASSIGN_OR_RETURN(const Caller caller, auth_->User(*ctx));
        return RespondList(manager_->ListJobs(request.limit(), JobsListedFor(caller)), response,
                           &v1::ListJobsResponse::add_jobs);
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::ListTrials(grpc::CallbackServerContext* ctx,
                                                        const Raw* in, Raw* out) {
  return AdmittedUnary<v1::ListTrialsRequest, v1::ListTrialsResponse>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::ListTrialsRequest& request, v1::ListTrialsResponse* response) -> absl::Status {
        RETURN_IF_ERROR(JobCaller(ctx, request.job_id()).status());
        return Respond(manager_->ListTrialsPage(request), response);
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::QueryStrategies(grpc::CallbackServerContext* ctx,
                                                             const Raw* in, Raw* out) {
  return AdmittedUnary<v1::QueryStrategiesRequest, v1::QueryStrategiesResponse>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::QueryStrategiesRequest& request,
          v1::QueryStrategiesResponse* response) -> absl::Status {
        RETURN_IF_ERROR(auth_->User(*ctx).status());
        RETURN_IF_ERROR(CheckQueryRequestLimits(request));
        return RespondList(::autoaccel::QueryStrategies(store_, request), response,
                           &v1::QueryStrategiesResponse::add_answers);
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::ListStrategies(grpc::CallbackServerContext* ctx,
                                                            const Raw* in, Raw* out) {
  return AdmittedUnary<v1::ListStrategiesRequest, v1::ListStrategiesResponse>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::ListStrategiesRequest& request,
          v1::ListStrategiesResponse* response) -> absl::Status {
        RETURN_IF_ERROR(auth_->User(*ctx).status());
        return RespondList(::autoaccel::ListStrategies(store_, request), response,
                           &v1::ListStrategiesResponse::add_answers);
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::ListWorkers(grpc::CallbackServerContext* ctx,
                                                         const Raw* in, Raw* out) {
  return AdmittedUnary<v1::ListWorkersRequest, v1::ListWorkersResponse>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::ListWorkersRequest& request,
          v1::ListWorkersResponse* response) -> absl::Status {
        RETURN_IF_ERROR(auth_->User(*ctx).status());
        ASSIGN_OR_RETURN(*response, manager_->ListWorkers(request));
        response->set_coordinator_insecure(insecure_);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::GetTrialLogs(grpc::CallbackServerContext* ctx,
                                                          const Raw* in, Raw* out) {
  if (absl::Status admitted = auth_->User(*ctx).status(); !admitted.ok()) {
    return AdmittedUnary<v1::GetTrialLogsRequest, v1::TrialLogs>(
        ctx, admitted, in, out, [](const v1::GetTrialLogsRequest&, v1::TrialLogs*) {
          return absl::OkStatus();  // never called
        });
  }
  return ParsedUnaryLater<v1::GetTrialLogsRequest, v1::TrialLogs>(
      ctx, in, out,
      [&](const v1::GetTrialLogsRequest& request,
          std::function<void(absl::StatusOr<v1::TrialLogs>)> finish) {
        absl::StatusOr<std::string> job_id = TrialLogsJobId(request);
        absl::Status allowed = job_id.ok() ? JobCaller(ctx, *job_id).status() : job_id.status();
        if (allowed.ok() && logs_ == nullptr) {
          allowed = absl::UnimplementedError("this coordinator does not relay trial logs");
        }
        if (!allowed.ok()) {
          finish(allowed);
          return;
        }
        logs_->Fetch(request, std::move(finish));
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::Export(grpc::CallbackServerContext* ctx, const Raw* in,
                                                    Raw* out) {
  return AdmittedUnary<v1::ExportRequest, v1::ExportAnswer>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::ExportRequest& request, v1::ExportAnswer* response) -> absl::Status {
        const bool of_job = !request.job_id().empty();
        RETURN_IF_ERROR(of_job ? JobCaller(ctx, request.job_id()).status()
                               : auth_->User(*ctx).status());
        RETURN_IF_ERROR(CheckExportRequestLimits(request));
        std::optional<v1::Job> job;
        if (of_job) {
          ASSIGN_OR_RETURN(job, manager_->GetJob(request.job_id()));
        }
        ASSIGN_OR_RETURN(const ExportInput input, ExportInputOf(request, job ? &*job : nullptr));
        ASSIGN_OR_RETURN(const ExportResult result, ::autoaccel::Export(input));
        response->set_result_json(ExportResultToJson(result).dump(
            -1, ' ', false, nlohmann::json::error_handler_t::replace));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* TuningServiceImpl::Estimate(grpc::CallbackServerContext* ctx,
                                                      const Raw* in, Raw* out) {
  return AdmittedUnary<v1::EstimateRequest, v1::EstimateAnswer>(
      ctx, auth_->User(*ctx).status(), in, out,
      [&](const v1::EstimateRequest& request, v1::EstimateAnswer* response) -> absl::Status {
        RETURN_IF_ERROR(auth_->User(*ctx).status());
        RETURN_IF_ERROR(CheckEstimateRequestLimits(request));
        ASSIGN_OR_RETURN(const EstimateReport report, ::autoaccel::Estimate(request));
        response->set_result_json(EstimateReportJson(report).dump());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* WorkerRegistryImpl::Register(grpc::CallbackServerContext* ctx,
                                                       const Raw* in, Raw* out) {
  return AdmittedUnary<v1::RegisterRequest, v1::RegisterResponse>(
      ctx, auth_->Worker(*ctx), in, out,
      [&](const v1::RegisterRequest& request, v1::RegisterResponse* response) -> absl::Status {
        RETURN_IF_ERROR(auth_->Worker(*ctx));
        return Respond(manager_->RegisterWorker(request), response);
      });
}

grpc::ServerUnaryReactor* WorkerRegistryImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                        const Raw* in, Raw* out) {
  return AdmittedUnary<v1::HeartbeatRequest, v1::HeartbeatResponse>(
      ctx, auth_->Worker(*ctx), in, out,
      [&](const v1::HeartbeatRequest& request, v1::HeartbeatResponse*) -> absl::Status {
        RETURN_IF_ERROR(auth_->Worker(*ctx));
        RETURN_IF_ERROR(CheckLimit(Limit::kWorkerIdBytes,
                                   static_cast<double>(request.worker_id().size()), "worker_id"));
        return manager_->Heartbeat(request.worker_id(), request.session_token(),
                                   request.timing_jitter());
      });
}

grpc::ServerUnaryReactor* WorkerRegistryImpl::Leave(grpc::CallbackServerContext* ctx, const Raw* in,
                                                    Raw* out) {
  return AdmittedUnary<v1::LeaveRequest, v1::LeaveResponse>(
      ctx, auth_->Worker(*ctx), in, out,
      [&](const v1::LeaveRequest& request, v1::LeaveResponse*) -> absl::Status {
        RETURN_IF_ERROR(auth_->Worker(*ctx));
        RETURN_IF_ERROR(CheckLimit(Limit::kWorkerIdBytes,
                                   static_cast<double>(request.worker_id().size()), "worker_id"));
        return manager_->LeaveWorker(request.worker_id(), request.session_token());
      });
}

}  // namespace autoaccel
