// The channel a client (the CLI, a worker's registrar, tests) opens to an
// autoaccel daemon: TLS or plaintext credentials (common/tls_files.h) and a
// bearer token added to every call (common/bearer_token.h).
#ifndef AUTOACCEL_COMMON_CLIENT_CHANNEL_H_
#define AUTOACCEL_COMMON_CLIENT_CHANNEL_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

namespace autoaccel {

// A channel to `target` whose every call carries "authorization: Bearer
// `token`" (no header for an empty token). The token is copied; it never
// appears in logs or errors. Any thread.
std::shared_ptr<grpc::Channel> CreateClientChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::string& token, const grpc::ChannelArguments& args = grpc::ChannelArguments());

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_CLIENT_CHANNEL_H_
