// Thin gRPC handlers (callback API): authenticate the caller
// (server/auth.h), check that a job is theirs, call the JobManager (or the
// strategy database's queries) and map its absl::Status. Every user RPC
// answers UNAUTHENTICATED without a valid token (when tokens are required);
// GetJob, WatchJob, CancelJob and ListTrials answer PERMISSION_DENIED for
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
#include "proto/autoaccel.grpc.pb.h"
#include "server/auth.h"
#include "server/job_manager.h"
#include "server/store.h"

namespace autoaccel {

class TuningServiceImpl final : public v1::TuningService::CallbackService {
 public:
  // `insecure`: what the coordinator lacks when it runs unprotected on a
  // network address ("" when it does not), shown by ListWorkers.
  TuningServiceImpl(JobManager* manager, Store* store, const Authenticator* auth,
                    std::string insecure = "")
      : manager_(manager), store_(store), auth_(auth), insecure_(std::move(insecure)) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const v1::SubmitJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* ctx,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* ListTrials(grpc::CallbackServerContext* ctx,
                                       const v1::ListTrialsRequest* request,
                                       v1::ListTrialsResponse* response) override;
  grpc::ServerUnaryReactor* QueryStrategies(grpc::CallbackServerContext* ctx,
                                            const v1::QueryStrategiesRequest* request,
                                            v1::QueryStrategiesResponse* response) override;
  grpc::ServerUnaryReactor* ListStrategies(grpc::CallbackServerContext* ctx,
                                           const v1::ListStrategiesRequest* request,
                                           v1::ListStrategiesResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* ctx,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;

 private:
  // The caller, if they may act on job `job_id`.
  absl::StatusOr<Caller> JobCaller(grpc::CallbackServerContext* ctx, const std::string& job_id);

  // Open WatchJob streams by user (Limit::kWatchStreamsPerUser).
  absl::Mutex watch_mu_;
  std::map<std::string, int> watches_ ABSL_GUARDED_BY(watch_mu_);

  JobManager* const manager_;
  Store* const store_;
  const Authenticator* const auth_;
  const std::string insecure_;
};

class WorkerRegistryImpl final : public v1::WorkerRegistry::CallbackService {
 public:
  WorkerRegistryImpl(JobManager* manager, const Authenticator* auth)
      : manager_(manager), auth_(auth) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;

 private:
  JobManager* const manager_;
  const Authenticator* const auth_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_SERVICE_H_
