// A gRPC server for tests on 127.0.0.1:0 — the port it bound read back,
// never "find a free port, then bind" (that races) — and a channel to it.
#ifndef AUTOACCEL_TESTS_LOCAL_SERVER_H_
#define AUTOACCEL_TESTS_LOCAL_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <memory>
#include <string>

#include "common/client_channel.h"

namespace autoaccel::testing {

struct LocalServer {
  std::unique_ptr<grpc::Server> server;  // null if it did not start
  int port = 0;                          // 0 if it did not start
  std::shared_ptr<grpc::Channel> channel;
};

// The session token worker tests hand their WorkerServiceImpl's gate and
// send with every call (as the coordinator does).
inline constexpr char kTestSessionToken[] = "test-session-token-0123456789";

// Serves `services` (which must outlive the server) until the server is shut
// down or destroyed; the channel's calls carry `token` as a bearer token
// ("" for none).
inline LocalServer ServeLocally(std::initializer_list<grpc::Service*> services,
                                const std::string& token = "") {
  LocalServer local;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &local.port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  local.server = builder.BuildAndStart();
  local.channel = CreateClientChannel("127.0.0.1:" + std::to_string(local.port),
                                      grpc::InsecureChannelCredentials(), token);
  return local;
}
inline LocalServer ServeLocally(grpc::Service* service, const std::string& token = "") {
  return ServeLocally({service}, token);
}

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_LOCAL_SERVER_H_
