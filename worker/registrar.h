#ifndef AUTOACCEL_WORKER_REGISTRAR_H_
#define AUTOACCEL_WORKER_REGISTRAR_H_

#include <grpcpp/channel.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "proto/autoaccel.grpc.pb.h"

namespace autoaccel {

// Keeps this worker known to the coordinator: registers (retrying with
// backoff while the coordinator is unreachable), then heartbeats at the
// interval the coordinator asks for, and registers again when a heartbeat is
// answered NOT_FOUND (the coordinator restarted). Every RPC has a deadline.
class Registrar {
 public:
  Registrar(std::shared_ptr<grpc::Channel> coordinator, v1::RegisterRequest registration);
  ~Registrar();
  void Start();
  void Stop();
  // Registers again, soon, with these devices (e.g. a raised peak). Any
  // thread.
  void UpdateDevices(const std::vector<v1::Device>& devices);

 private:
  void Run();

  std::unique_ptr<v1::WorkerRegistry::Stub> stub_;
  std::mutex mu_;
  std::condition_variable cv_;
  v1::RegisterRequest registration_;  // guarded by mu_
  bool reregister_ = false;           // guarded by mu_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_REGISTRAR_H_
