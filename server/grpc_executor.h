#ifndef AUTOACCEL_SERVER_GRPC_EXECUTOR_H_
#define AUTOACCEL_SERVER_GRPC_EXECUTOR_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "proto/autoaccel.grpc.pb.h"
#include "server/job_manager.h"

namespace autoaccel {

// Reaches workers over gRPC with the callback API; one channel per address,
// created on first use. Thread-safe.
class GrpcTrialExecutor : public TrialExecutor {
 public:
  void RunTrial(const std::string& address, const v1::RunTrialRequest& request,
                absl::Duration rpc_timeout, Done done) override;
  void CancelTrial(const std::string& address, const v1::CancelTrialRequest& request) override;

 private:
  v1::WorkerService::Stub* StubFor(const std::string& address);

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<v1::WorkerService::Stub>> stubs_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_GRPC_EXECUTOR_H_
