// Thin gRPC handlers (callback API): validate nothing themselves, call the
// JobManager (or the strategy database's queries), map its absl::Status.
// `manager` and `store` must outlive the services.
#ifndef AUTOACCEL_SERVER_SERVICE_H_
#define AUTOACCEL_SERVER_SERVICE_H_

#include "proto/autoaccel.grpc.pb.h"
#include "server/job_manager.h"
#include "server/store.h"

namespace autoaccel {

class TuningServiceImpl final : public v1::TuningService::CallbackService {
 public:
  TuningServiceImpl(JobManager* manager, Store* store) : manager_(manager), store_(store) {}

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
  JobManager* const manager_;
  Store* const store_;
};

class WorkerRegistryImpl final : public v1::WorkerRegistry::CallbackService {
 public:
  explicit WorkerRegistryImpl(JobManager* manager) : manager_(manager) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;

 private:
  JobManager* const manager_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_SERVICE_H_
