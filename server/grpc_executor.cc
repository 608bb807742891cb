#include "server/grpc_executor.h"

#include <grpcpp/grpcpp.h>

#include "common/grpc_status.h"

namespace autoaccel {

v1::WorkerService::Stub* GrpcTrialExecutor::StubFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    stub = v1::WorkerService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  return stub.get();
}

void GrpcTrialExecutor::RunTrial(const std::string& address, const v1::RunTrialRequest& request,
                                 absl::Duration rpc_timeout, Done done) {
  struct Call {
    grpc::ClientContext context;
    v1::RunTrialRequest request;
    v1::RunTrialResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout));
  StubFor(address)->async()->RunTrial(&call->context, &call->request, &call->response,
                                      [call, done = std::move(done)](grpc::Status status) {
                                        done(FromGrpcStatus(status), std::move(call->response));
                                      });
}

void GrpcTrialExecutor::CancelTrial(const std::string& address,
                                    const v1::CancelTrialRequest& request) {
  struct Call {
    grpc::ClientContext context;
    v1::CancelTrialRequest request;
    v1::CancelTrialResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.cancel_timeout));
  StubFor(address)->async()->CancelTrial(&call->context, &call->request, &call->response,
                                         [call](grpc::Status) {});
}

}  // namespace autoaccel
