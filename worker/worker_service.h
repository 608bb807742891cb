// The worker daemon's gRPC service: runs trial ranks on this node's devices.
#ifndef AUTOACCEL_WORKER_WORKER_SERVICE_H_
#define AUTOACCEL_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/autoaccel.grpc.pb.h"
#include "worker/trial_process.h"

namespace autoaccel {

struct WorkerOptions {
  std::string runner_path;
  std::string work_dir;
  std::vector<v1::Device> devices;
  int threads_per_device = 1;
};

// Parses "cpu:N" (N CPU slots sharing this node's memory) or "cuda:0,1,..".
// `memory_bytes` per device: for cpu, 0 means physical memory / N.
absl::StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text, int64_t memory_bytes);

// Each RunTrial spawns one child process on a thread of its own and answers
// when the child is done. A repeated RunTrial for the same trial and attempt
// attaches to the running child instead of starting another. The child is
// stopped when CancelTrial arrives, when every caller has gone (the
// coordinator died or gave up), or at its timeout.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(WorkerOptions options) : options_(std::move(options)) {}
  ~WorkerServiceImpl() override;

  grpc::ServerUnaryReactor* RunTrial(grpc::CallbackServerContext* ctx,
                                     const v1::RunTrialRequest* request,
                                     v1::RunTrialResponse* response) override;
  grpc::ServerUnaryReactor* CancelTrial(grpc::CallbackServerContext* ctx,
                                        const v1::CancelTrialRequest* request,
                                        v1::CancelTrialResponse* response) override;

  // Stops every running child and waits for their threads.
  void Shutdown();

 private:
  struct Waiter {
    grpc::CallbackServerContext* ctx;
    grpc::ServerUnaryReactor* reactor;
    v1::RunTrialResponse* response;
  };
  struct Execution {
    std::vector<Waiter> waiters;
    std::atomic<bool> cancel{false};
  };

  void RunExecution(std::string key, TrialSpec spec, absl::Duration timeout);

  const WorkerOptions options_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::map<std::string, std::shared_ptr<Execution>> running_;  // by "trial_id/attempt"
  int threads_ = 0;
  bool shutting_down_ = false;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_WORKER_SERVICE_H_
