#ifndef AUTOACCEL_WORKER_REGISTRAR_H_
#define AUTOACCEL_WORKER_REGISTRAR_H_

#include <grpcpp/channel.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "proto/autoaccel.grpc.pb.h"
#include "worker/coordinator_gate.h"

namespace autoaccel {

// Keeps this worker known to the coordinator: registers (retrying with
// backoff while the coordinator is unreachable), then heartbeats at the
// interval the coordinator asks for, and registers again when a heartbeat is
// answered NOT_FOUND (the coordinator restarted or forgot it) or
// PERMISSION_DENIED (its session was replaced). Every RPC has a deadline.
// Each registration's session token goes to `gate` (worker/coordinator_gate.h)
// and travels with the heartbeats and later registrations; the join token,
// if the coordinator wants one, is the channel's bearer token
// (common/client_channel.h). Every registration carries the trial ranks
// `running_ranks` returns (WorkerServiceImpl::RunningRanks), so that a
// restarted coordinator takes them up.
class Registrar {
 public:
  using RunningRanks = std::function<std::vector<v1::RunningRank>()>;
  // `gate` must outlive the registrar; `running_ranks` (may be empty) is
  // called on the registrar's thread.
  Registrar(std::shared_ptr<grpc::Channel> coordinator, v1::RegisterRequest registration,
            CoordinatorGate* gate, RunningRanks running_ranks = {});
  ~Registrar();
  void Start();
  // Stops heartbeating and, when registered, tells the coordinator this
  // worker leaves (WorkerRegistry.Leave; waits up to 2 s). Idempotent.
  void Stop();
  // Registers again, soon, with these devices (e.g. a raised peak). Any
  // thread.
  void UpdateDevices(const std::vector<v1::Device>& devices);

 private:
  void Run();

  std::unique_ptr<v1::WorkerRegistry::Stub> stub_;
  CoordinatorGate* const gate_;
  const RunningRanks running_ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  v1::RegisterRequest registration_;  // guarded by mu_
  bool reregister_ = false;           // guarded by mu_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_REGISTRAR_H_
