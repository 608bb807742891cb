// A gRPC server for tests on 127.0.0.1:0 — the port it bound read back,
// never "find a free port, then bind" (that races) — and a channel to it.
#ifndef AUTOACCEL_TESTS_LOCAL_SERVER_H_
#define AUTOACCEL_TESTS_LOCAL_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace autoaccel::testing {

struct LocalServer {
  std::unique_ptr<grpc::Server> server;  // null if it did not start
  int port = 0;                          // 0 if it did not start
  std::shared_ptr<grpc::Channel> channel;
};

// Serves `service` (which must outlive the server) until the server is shut
// down or destroyed.
inline LocalServer ServeLocally(grpc::Service* service) {
  LocalServer local;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &local.port);
  builder.RegisterService(service);
  local.server = builder.BuildAndStart();
  local.channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(local.port),
                                      grpc::InsecureChannelCredentials());
  return local;
}

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_LOCAL_SERVER_H_
