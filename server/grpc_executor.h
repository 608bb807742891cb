#ifndef AUTOACCEL_SERVER_GRPC_EXECUTOR_H_
#define AUTOACCEL_SERVER_GRPC_EXECUTOR_H_

#include <grpcpp/security/credentials.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/autoaccel.grpc.pb.h"
#include "server/trial_executor.h"

namespace autoaccel {

// Reaches workers over gRPC with the callback API; one channel per address
// (and TLS or not), created on first use. Every call carries the worker's
// session token as a bearer token. Thread-safe.
struct GrpcTrialExecutorOptions {
  // How long a CancelTrial may take before it is given up (best effort).
  absl::Duration cancel_timeout = absl::Seconds(5);
  // For workers that serve TLS: trusting the coordinator's --tls-ca (null:
  // the system's root certificates).
  std::shared_ptr<grpc::ChannelCredentials> tls_credentials;
};

class GrpcTrialExecutor : public TrialExecutor {
 public:
  explicit GrpcTrialExecutor(GrpcTrialExecutorOptions options = {}) : options_(options) {}

  void RunTrial(const WorkerEndpoint& to, const v1::RunTrialRequest& request,
                absl::Duration rpc_timeout, Done done) override;
  void CancelTrial(const WorkerEndpoint& to, const v1::CancelTrialRequest& request) override;
  void StoreModelFile(const WorkerEndpoint& to, v1::StoreModelFileRequest request,
                      absl::Duration rpc_timeout, StoreDone done) override;
  void ReadRankLogs(const WorkerEndpoint& to, const v1::ReadRankLogsRequest& request,
                    absl::Duration rpc_timeout, LogsDone done) override;

 private:
  v1::WorkerService::Stub* StubFor(const WorkerEndpoint& to);

  const GrpcTrialExecutorOptions options_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, bool>, std::unique_ptr<v1::WorkerService::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);  // by (address, tls)
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_GRPC_EXECUTOR_H_
