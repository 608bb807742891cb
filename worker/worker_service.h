// The worker daemon's gRPC service: runs trial ranks on this node's devices.
#ifndef AUTOACCEL_WORKER_WORKER_SERVICE_H_
#define AUTOACCEL_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autoaccel.grpc.pb.h"
#include "worker/trial_process.h"

namespace autoaccel {

struct WorkerOptions {
  std::string runner_path;
  std::string work_dir;
  std::vector<v1::Device> devices;
  int threads_per_device = 1;
  // What each rank's spec is told to run on, by device index ("cpu",
  // "cuda:N"), as DescribeDevices returns it. Empty: "cpu" for cpu devices,
  // the device's name for the others (ParseDevices names them "cuda:N").
  std::vector<std::string> runner_devices;
};

// Parses "cpu:N" (N CPU slots sharing this node's memory) or "cuda:0,1,..".
// `memory_bytes` per device: for cpu, 0 means physical memory / N.
absl::StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text, int64_t memory_bytes);

// "A-B": the ports (1 <= A <= B <= 65535) on which rank 0 of a multi-rank
// trial may serve its rendezvous store. INVALID_ARGUMENT naming
// --rendezvous-ports otherwise.
absl::StatusOr<std::pair<int, int>> ParseRendezvousPorts(const std::string& text);

// The address the worker registers: the coordinator sends trials to it and
// the other ranks of a gang whose rank 0 runs here meet at its host. It is
// `advertise_host` when given, else the host of `listen` ("HOST:PORT"),
// except that a wildcard listen host ("0.0.0.0", "::", "[::]" or empty),
// which no other machine can dial, is replaced by `hostname`. The port is
// the one the server bound (`port`). IPv6 hosts come back in brackets.
std::string AdvertisedAddress(const std::string& listen, int port,
                              const std::string& advertise_host, const std::string& hostname);

// "fp32=X,bf16=Y,fp16=Z" (TFLOP/s, non-negative; any of the three, each at
// most once, the others 0 = unknown). INVALID_ARGUMENT naming --peak-tflops
// otherwise.
absl::StatusOr<PeakTflops> ParsePeakTflops(const std::string& text);

// How the worker learns what its devices are when it starts.
struct DeviceProbeOptions {
  std::string runner_path;  // cpu: runs `RUNNER --probe-peak --threads N` once
  int threads_per_device = 1;
  std::string work_dir;  // the probes' output and logs
  // --peak-tflops: every device's peak; nothing is probed for it.
  std::optional<PeakTflops> peak;
  // --device-memory was given: nvidia-smi's memory.total is not used.
  bool keep_memory = false;
  // Queried as `NVIDIA_SMI --query-gpu=index,name,memory.total
  // --format=csv,noheader,nounits`; a path or a name in $PATH.
  std::string nvidia_smi = "nvidia-smi";
  absl::Duration timeout = absl::Minutes(1);  // per probe
};

// Fills in `devices` as ParseDevices made them. cuda devices: name = the GPU
// model nvidia-smi reports for the ordinal (renumbered through a numeric
// CUDA_VISIBLE_DEVICES), memory_bytes = its memory.total unless
// keep_memory, peak_tflops from PeakTflopsForGpuName. cpu devices:
// peak_tflops measured by the trial runner's probe. An explicit `peak`
// replaces both peak sources. Never fails: what cannot be learnt (no
// nvidia-smi, a probe that fails) stays as it was, peak 0 = unknown, and a
// warning is logged. Returns the devices' runner_devices (WorkerOptions).
// Blocks while the probes run (about a second, most of it loading LibTorch).
std::vector<std::string> DescribeDevices(const DeviceProbeOptions& options,
                                         std::vector<v1::Device>* devices);

// Each RunTrial spawns one child process (one trial rank) on a thread of its
// own and answers when the child is done. A repeated RunTrial for the same
// trial, attempt and rank attaches to the running child instead of starting
// another; other ranks of the trial run beside it. A child is stopped when
// CancelTrial arrives for its trial and attempt (every rank of it here), when
// every caller has gone (the coordinator died or gave up), or at its timeout.
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

  // (trial id, attempt, rank): a trial's ranks on this worker run side by
  // side, each its own child; ordered so one trial's ranks are adjacent.
  using ExecutionKey = std::tuple<std::string, int, int>;

  void RunExecution(ExecutionKey key, TrialSpec spec, absl::Duration timeout);

  const WorkerOptions options_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::map<ExecutionKey, std::shared_ptr<Execution>> running_;
  int threads_ = 0;
  bool shutting_down_ = false;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_WORKER_SERVICE_H_
