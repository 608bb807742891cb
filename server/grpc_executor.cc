#include "server/grpc_executor.h"

#include <grpcpp/grpcpp.h>

#include "common/bearer_token.h"
#include "common/grpc_status.h"

namespace autoaccel {

v1::WorkerService::Stub* GrpcTrialExecutor::StubFor(const WorkerEndpoint& to) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[{to.address, to.tls}];
  if (!stub) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (to.tls) {
      credentials = options_.tls_credentials ? options_.tls_credentials
                                             : grpc::SslCredentials(grpc::SslCredentialsOptions());
    }
    stub = v1::WorkerService::NewStub(grpc::CreateChannel(to.address, credentials));
  }
  return stub.get();
}

namespace {

// One asynchronous call: its context (with `deadline`), request and answer,
// alive until the callback has run.
template <typename Request, typename Response>
struct Call {
  Call(Request r, absl::Time deadline, const std::string& token) : request(std::move(r)) {
    context.set_deadline(absl::ToChronoTime(deadline));
    AddBearerToken(&context, token);
  }
  grpc::ClientContext context;
  Request request;
  Response response;
};

}  // namespace

void GrpcTrialExecutor::RunTrial(const WorkerEndpoint& to, const v1::RunTrialRequest& request,
                                 absl::Duration rpc_timeout, Done done) {
  auto call = std::make_shared<Call<v1::RunTrialRequest, v1::RunTrialResponse>>(
      request, absl::Now() + rpc_timeout, to.session_token);
  StubFor(to)->async()->RunTrial(&call->context, &call->request, &call->response,
                                 [call, done = std::move(done)](grpc::Status status) {
                                   done(FromGrpcStatus(status), std::move(call->response));
                                 });
}

void GrpcTrialExecutor::CancelTrial(const WorkerEndpoint& to,
                                    const v1::CancelTrialRequest& request) {
  auto call = std::make_shared<Call<v1::CancelTrialRequest, v1::CancelTrialResponse>>(
      request, absl::Now() + options_.cancel_timeout, to.session_token);
  StubFor(to)->async()->CancelTrial(&call->context, &call->request, &call->response,
                                    [call](grpc::Status) {});
}

void GrpcTrialExecutor::StoreModelFile(const WorkerEndpoint& to, v1::StoreModelFileRequest request,
                                       absl::Duration rpc_timeout, StoreDone done) {
  auto call = std::make_shared<Call<v1::StoreModelFileRequest, v1::StoreModelFileResponse>>(
      std::move(request), absl::Now() + rpc_timeout, to.session_token);
  StubFor(to)->async()->StoreModelFile(&call->context, &call->request, &call->response,
                                       [call, done = std::move(done)](grpc::Status status) {
                                         call->request.Clear();  // the bytes, at once
                                         done(FromGrpcStatus(status));
                                       });
}

void GrpcTrialExecutor::ReadRankLogs(const WorkerEndpoint& to,
                                     const v1::ReadRankLogsRequest& request,
                                     absl::Duration rpc_timeout, LogsDone done) {
  auto call = std::make_shared<Call<v1::ReadRankLogsRequest, v1::RankLogs>>(
      request, absl::Now() + rpc_timeout, to.session_token);
  StubFor(to)->async()->ReadRankLogs(&call->context, &call->request, &call->response,
                                     [call, done = std::move(done)](grpc::Status status) {
                                       if (!status.ok()) {
                                         done(FromGrpcStatus(status));
                                       } else {
                                         done(std::move(call->response));
                                       }
                                     });
}

}  // namespace autoaccel
