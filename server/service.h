// Thin gRPC handlers (callback API, raw: each parses its own request, so a
// malformed one is INVALID_ARGUMENT, see common/raw_call.h): authenticate the caller
// (server/auth.h), check that a job is theirs, call the JobManager (or the
// strategy database's queries) and map its absl::Status. Every user RPC
// answers UNAUTHENTICATED without a valid token (when tokens are required);
// GetJob, WatchJob, CancelJob, ListTrials, GetTrialLogs and Export of a job answer
// PERMISSION_DENIED for
// another user's job; ListJobs lists the caller's own jobs (an admin's: every
// job). The strategy database and the worker list are readable by every
// user. With users, each may hold at most Limit::kJobsPerUser unfinished jobs
// (JobManager::SubmitJob) and Limit::kWatchStreamsPerUser open watch streams
// (server/request_limits.h): RESOURCE_EXHAUSTED beyond. Register and Heartbeat answer
// UNAUTHENTICATED without the join token. `manager`, `store` and `auth` must outlive the services.
#ifndef AUTOACCEL_SERVER_SERVICE_H_
#define AUTOACCEL_SERVER_SERVICE_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/raw_call.h"
#include "proto/autoaccel.grpc.pb.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/store/store.h"
#include "server/trial_logs.h"

namespace autoaccel {

// Every method registered raw: the handlers parse their own requests, so a
// request that is not UTF-8 where it must be is INVALID_ARGUMENT naming the
// field (common/raw_call.h), parsed before the caller is authenticated.
using RawTuningService =
    RawMethods<v1::TuningService::Service, v1::TuningService::WithRawCallbackMethod_SubmitJob,
               v1::TuningService::WithRawCallbackMethod_GetJob,
               v1::TuningService::WithRawCallbackMethod_WatchJob,
               v1::TuningService::WithRawCallbackMethod_CancelJob,
               v1::TuningService::WithRawCallbackMethod_ListJobs,
               v1::TuningService::WithRawCallbackMethod_ListTrials,
               v1::TuningService::WithRawCallbackMethod_QueryStrategies,
               v1::TuningService::WithRawCallbackMethod_ListStrategies,
               v1::TuningService::WithRawCallbackMethod_ListWorkers,
               v1::TuningService::WithRawCallbackMethod_GetTrialLogs,
               v1::TuningService::WithRawCallbackMethod_Export,
               v1::TuningService::WithRawCallbackMethod_Estimate>;
using RawWorkerRegistry =
    RawMethods<v1::WorkerRegistry::Service, v1::WorkerRegistry::WithRawCallbackMethod_Register,
               v1::WorkerRegistry::WithRawCallbackMethod_Heartbeat,
               v1::WorkerRegistry::WithRawCallbackMethod_Leave>;

// Each raw method's request and response are the proto's
// (SubmitJob: SubmitJobRequest -> Job, and so on).
class TuningServiceImpl final : public RawTuningService {
 public:
  // `insecure`: what the coordinator lacks when it runs unprotected on a
  // network address ("" when it does not), shown by ListWorkers.
  // `logs` (null: GetTrialLogs answers UNIMPLEMENTED) must outlive it too.
  TuningServiceImpl(JobManager* manager, Store* store, const Authenticator* auth,
                    std::string insecure = "", TrialLogRelay* logs = nullptr)
      : manager_(manager),
        store_(store),
        auth_(auth),
        insecure_(std::move(insecure)),
        logs_(logs) {}

  using Raw = grpc::ByteBuffer;
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx, const Raw* request,
                                      Raw* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx, const Raw* request,
                                   Raw* response) override;
  // Streams v1::JobEvent.
  grpc::ServerWriteReactor<Raw>* WatchJob(grpc::CallbackServerContext* ctx,
                                          const Raw* request) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx, const Raw* request,
                                      Raw* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx, const Raw* request,
                                     Raw* response) override;
  grpc::ServerUnaryReactor* ListTrials(grpc::CallbackServerContext* ctx, const Raw* request,
                                       Raw* response) override;
  grpc::ServerUnaryReactor* QueryStrategies(grpc::CallbackServerContext* ctx, const Raw* request,
                                            Raw* response) override;
  grpc::ServerUnaryReactor* ListStrategies(grpc::CallbackServerContext* ctx, const Raw* request,
                                           Raw* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* ctx, const Raw* request,
                                        Raw* response) override;
  // Answers when the worker has (server/trial_logs.h).
  grpc::ServerUnaryReactor* GetTrialLogs(grpc::CallbackServerContext* ctx, const Raw* request,
                                         Raw* response) override;
  // offline/export_request.h, offline/estimate_report.h: computed here,
  // nothing runs.
  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* ctx, const Raw* request,
                                   Raw* response) override;
  grpc::ServerUnaryReactor* Estimate(grpc::CallbackServerContext* ctx, const Raw* request,
                                     Raw* response) override;

 private:
  // The caller, if they may act on job `job_id`.
  absl::StatusOr<Caller> JobCaller(grpc::CallbackServerContext* ctx, const std::string& job_id);
  // WatchJob on a parsed request.
  grpc::ServerWriteReactor<Raw>* Watch(grpc::CallbackServerContext* ctx,
                                       const v1::WatchJobRequest& request);

  // Open WatchJob streams by user (Limit::kWatchStreamsPerUser).
  absl::Mutex watch_mu_;
  std::map<std::string, int> watches_ ABSL_GUARDED_BY(watch_mu_);

  JobManager* const manager_;
  Store* const store_;
  const Authenticator* const auth_;
  const std::string insecure_;
  TrialLogRelay* const logs_;
};

class WorkerRegistryImpl final : public RawWorkerRegistry {
 public:
  WorkerRegistryImpl(JobManager* manager, const Authenticator* auth)
      : manager_(manager), auth_(auth) {}

  using Raw = grpc::ByteBuffer;
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx, const Raw* request,
                                     Raw* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx, const Raw* request,
                                      Raw* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* ctx, const Raw* request,
                                  Raw* response) override;

 private:
  JobManager* const manager_;
  const Authenticator* const auth_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_SERVICE_H_
