// Bearer tokens on gRPC calls: the caller puts "authorization: Bearer TOKEN"
// into a call's metadata (AddBearerToken, or a channel made by
// CreateClientChannel in common/client_channel.h), the service reads it back
// with BearerTokenOf. User and join tokens (server/auth.h) and the session
// token that lets the coordinator run trials on a worker
// (worker/coordinator_gate.h) all travel this way.
#ifndef AUTOACCEL_COMMON_BEARER_TOKEN_H_
#define AUTOACCEL_COMMON_BEARER_TOKEN_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include <string>

namespace autoaccel {

inline constexpr char kAuthorizationMetadataKey[] = "authorization";

// The token of the call's "authorization: Bearer TOKEN" metadata; "" when
// the call has none (or another scheme). Any thread.
std::string BearerTokenOf(const grpc::ServerContextBase& ctx);

// Adds "authorization: Bearer TOKEN" to the call; nothing for an empty token.
void AddBearerToken(grpc::ClientContext* ctx, const std::string& token);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_BEARER_TOKEN_H_
