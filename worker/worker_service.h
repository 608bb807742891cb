// The worker daemon's gRPC service: runs trial ranks on this node's devices.
#ifndef AUTOACCEL_WORKER_WORKER_SERVICE_H_
#define AUTOACCEL_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <functional>
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
  // The cpu devices' peaks were measured by the probe (not given): a trial
  // that computes faster proves the probe under-measured, and raises them.
  bool cpu_peaks_measured = false;
  // Called (on a trial's thread, no lock held) with every device after a
  // peak was raised, so the coordinator learns of it.
  std::function<void(const std::vector<v1::Device>&)> on_devices_changed;
};

// Parses "cpu:N" (N CPU slots sharing this node's memory) or "cuda:0,1,..".
// `memory_bytes` per device: for cpu, 0 means physical memory / N.
absl::StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text, int64_t memory_bytes);

// "A-B": the ports (1 <= A <= B <= 65535) on which rank 0 of a multi-rank
// trial may serve its rendezvous store. INVALID_ARGUMENT naming
// --rendezvous-ports otherwise.
absl::StatusOr<std::pair<int, int>> ParseRendezvousPorts(const std::string& text);

// OK when `value` may become part of a file name in the work dir: 1 to 128
// letters, digits, '-', '_' or '.', not starting with '.' (so no "..", no
// '/', no NUL). INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckFileNamePart(absl::string_view field, absl::string_view value);

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
  std::string runner_path;  // cpu: runs `RUNNER --probe-peak --threads N`
  int threads_per_device = 1;
  // cpu: the probe runs this many times a moment apart and the best figure
  // per precision is kept (a peak must not be under-measured).
  int probe_repeats = 3;
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
// Blocks while the probes run (a few seconds, most of it loading LibTorch).
// `unidentified`, when given, receives the cuda devices ("cuda:N") that
// nvidia-smi did not list (or all of them when it cannot be run): on such a
// machine a trial could not run there.
std::vector<std::string> DescribeDevices(const DeviceProbeOptions& options,
                                         std::vector<v1::Device>* devices,
                                         std::vector<std::string>* unidentified = nullptr);

// Each RunTrial spawns one child process (one trial rank) on a thread of its
// own and answers when the child is done. A repeated RunTrial for the same
// trial, attempt and rank attaches to the running child instead of starting
// another; other ranks of the trial run beside it. A child is stopped when
// CancelTrial arrives for its trial and attempt (every rank of it here), when
// every caller has gone (the coordinator died or gave up), or at its timeout.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(WorkerOptions options)
      : options_(std::move(options)), devices_(options_.devices) {}
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

  void RunExecution(ExecutionKey key, int device_index, TrialSpec spec, absl::Duration timeout);

  // A trial on a probed cpu device measured above its peak (MFU > 100%): the
  // probe under-measured it. Raises every cpu device's peak at the trial's
  // precision to what the trial achieved per device and restates the
  // trial's MFU against it.
  void RaisePeakIfBeaten(int device_index, const TrialSpec& spec, TrialResult* result);

  const WorkerOptions options_;
  std::mutex mu_;
  std::vector<v1::Device> devices_;  // guarded by mu_: peaks may be raised
  std::condition_variable idle_cv_;
  std::map<ExecutionKey, std::shared_ptr<Execution>> running_;
  int threads_ = 0;
  bool shutting_down_ = false;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_WORKER_SERVICE_H_
