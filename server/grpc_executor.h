#ifndef AUTOACCEL_SERVER_GRPC_EXECUTOR_H_
#define AUTOACCEL_SERVER_GRPC_EXECUTOR_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/autoaccel.grpc.pb.h"
#include "server/trial_executor.h"

namespace autoaccel {

// Reaches workers over gRPC with the callback API; one channel per address,
// created on first use. Thread-safe.
struct GrpcTrialExecutorOptions {
  // How long a CancelTrial may take before it is given up (best effort).
  absl::Duration cancel_timeout = absl::Seconds(5);
};

class GrpcTrialExecutor : public TrialExecutor {
 public:
  explicit GrpcTrialExecutor(GrpcTrialExecutorOptions options = {}) : options_(options) {}

  void RunTrial(const std::string& address, const v1::RunTrialRequest& request,
                absl::Duration rpc_timeout, Done done) override;
  void CancelTrial(const std::string& address, const v1::CancelTrialRequest& request) override;

 private:
  v1::WorkerService::Stub* StubFor(const std::string& address);

  const GrpcTrialExecutorOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::WorkerService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_GRPC_EXECUTOR_H_
