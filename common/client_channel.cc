#include "common/client_channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/client_interceptor.h>

#include <utility>
#include <vector>

#include "common/bearer_token.h"

namespace autoaccel {
namespace {

// Adds the authorization header to each call's initial metadata.
class BearerTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kAuthorizationMetadataKey, *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;  // owned by the factory, which outlives the channel's calls
};

class BearerTokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

std::shared_ptr<grpc::Channel> CreateClientChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::string& token, const grpc::ChannelArguments& args) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  if (!token.empty()) factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, std::move(credentials),
                                                                 args, std::move(factories));
}

}  // namespace autoaccel
