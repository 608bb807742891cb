// The worker daemon's gRPC service: runs trial ranks on this node's devices.
// The pieces it calls on live beside it: worker/rank_spec.h (request →
// spec), worker/model_file_cache.h (torchscript files), worker/trial_process.h
// (the trial runner's child process), worker/launcher_trial.h (a launcher's
// script as the rank); worker/device_discovery.h and worker/worker_flags.h
// serve worker/main.cc before the service starts.
#ifndef AUTOACCEL_WORKER_WORKER_SERVICE_H_
#define AUTOACCEL_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/raw_call.h"
#include "proto/autoaccel.grpc.pb.h"
#include "trial_contract/trial_result.h"
#include "trial_contract/trial_spec.h"
#include "worker/coordinator_gate.h"
#include "worker/launcher_cache.h"
#include "worker/launcher_trial.h"
#include "worker/launchers.h"
#include "worker/rank_environment.h"
#include "worker/rank_spec.h"
#include "worker/sandbox.h"
#include "worker/trial_dir_janitor.h"

namespace autoaccel {

struct WorkerOptions {
  // The trial runner; "" when this worker has none (only launcher trials).
  std::string runner_path;
  std::string work_dir;
  std::vector<v1::Device> devices;
  int threads_per_device = 1;
  // The cpu devices' peaks were measured by the probe (not given): a trial
  // that computes faster proves the probe under-measured, and raises them.
  bool cpu_peaks_measured = false;
  // Called (on a trial's thread, no lock held) with every device after a
  // peak was raised, so the coordinator learns of it.
  std::function<void(const std::vector<v1::Device>&)> on_devices_changed;
  // --launchers: what RunTrialRequest.launcher may name.
  Launchers launchers;
  // {python} in a launcher's argv.
  std::string python = "python3";
  // Between SIGTERM and SIGKILL when a launcher rank is stopped.
  absl::Duration launcher_grace = absl::Seconds(5);
  // Each launcher's persistent cache (--launcher-cache, --launcher-cache-hf).
  LauncherCache launcher_cache;
  // Told of every finished rank's directory, and removes the oldest beyond
  // --keep-trial-dirs; null: keep them all.
  std::shared_ptr<TrialDirJanitor> trial_dirs;
  // Every rank runs in it (worker/sandbox.h); null: --no-sandbox.
  std::shared_ptr<const Sandbox> sandbox;
  // The worker's variables every rank inherits (--rank-env).
  RankEnvAllowlist rank_env;
  // How long a rank whose every caller went away (its coordinator died or
  // restarted) keeps running, and how long the answer of a rank nobody was
  // waiting for is kept, for a coordinator to attach again (0: such a rank
  // is stopped at once, its answer dropped).
  absl::Duration reattach_window = absl::Seconds(60);
};

// Each RunTrial spawns one child process (one trial rank) on a thread of its
// own and answers when the child is done. A repeated RunTrial for the same
// trial, attempt and rank attaches to the running child instead of starting
// another; other ranks of the trial run beside it. A child is stopped when
// CancelTrial arrives for its trial and attempt (every rank of it here), at
// its timeout, or once every caller has gone (the coordinator died or
// restarted) for longer than options.reattach_window; the answer of a child
// that ended with nobody waiting is kept that long too. A RunTrial with
// attach_only attaches to such a rank, or gets its kept answer, and starts
// nothing (NOT_FOUND when there is none); RunningRanks() lists them for the
// registrar.
//
// A request that names a launcher runs the rank with it (RunLauncherRank,
// worker/launcher_trial.h) instead of the trial runner.
//
// RunTrial and CancelTrial answer UNAUTHENTICATED for a call without the
// coordinator's session token (gate(), worker/coordinator_gate.h). RunTrial
// answers RESOURCE_EXHAUSTED for a device that runs another rank (one rank
// per device), INVALID_ARGUMENT for a device_index this worker does not
// have, for a spec whose local_device_indices are not this worker's devices
// or do not hold device_index at local_rank, and for what RankSpecFromRequest and
// StoreModelFile refuse; FAILED_PRECONDITION for a launcher this worker does
// not have, or a trial without a launcher on a worker without a trial
// runner or on a device of another type than cpu and cuda; and UNAVAILABLE once Shutdown has begun;
// a trial that ran answers OK with its status (SUCCEEDED, OOM, FAILED, TIMEOUT, CANCELLED) in the
// response. The handlers are called on gRPC's threads; every method is thread-safe.
// ReadRankLogs reads a rank's log files (worker/rank_logs.h), running or
// ended; StoreModelFile keeps a torchscript job's model file by its digest
// (worker/model_file_cache.h) for the RunTrial calls that come without it;
// the same token rule holds for both.
//
// Every method registered raw: a request that is not UTF-8 where it must be
// is INVALID_ARGUMENT naming the field (common/raw_call.h).
using RawWorkerService =
    RawMethods<v1::WorkerService::Service, v1::WorkerService::WithRawCallbackMethod_RunTrial,
               v1::WorkerService::WithRawCallbackMethod_CancelTrial,
               v1::WorkerService::WithRawCallbackMethod_ReadRankLogs,
               v1::WorkerService::WithRawCallbackMethod_StoreModelFile>;

class WorkerServiceImpl final : public RawWorkerService {
 public:
  explicit WorkerServiceImpl(WorkerOptions options)
      : options_(std::move(options)), devices_(options_.devices) {}
  // Shutdown().
  ~WorkerServiceImpl() override;

  // v1::RunTrialRequest -> v1::RunTrialResponse.
  grpc::ServerUnaryReactor* RunTrial(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  // v1::CancelTrialRequest -> v1::CancelTrialResponse.
  grpc::ServerUnaryReactor* CancelTrial(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

  // v1::ReadRankLogsRequest -> v1::RankLogs.
  grpc::ServerUnaryReactor* ReadRankLogs(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  // v1::StoreModelFileRequest -> v1::StoreModelFileResponse.
  grpc::ServerUnaryReactor* StoreModelFile(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  // Stops every running child and waits for their threads; later RunTrials
  // are refused.
  void Shutdown();

  // Where the registrar hands over the coordinator's session token.
  CoordinatorGate* gate() { return &gate_; }

  // The ranks running here and the kept answers (see above), for the
  // registrar to report. Any thread.
  std::vector<v1::RunningRank> RunningRanks() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiter {
    grpc::CallbackServerContext* ctx;
    grpc::ServerUnaryReactor* reactor;
    grpc::ByteBuffer* response;  // the RunTrialResponse, serialized
  };
  // Finishes `waiter`'s call with `answer`.
  static void Answer(const Waiter& waiter, const v1::RunTrialResponse& answer);
  struct Execution {
    int device_index = 0;
    std::vector<Waiter> waiters;  // guarded by the service's mu_
    std::atomic<bool> cancel{false};
    // Since when every caller has gone; InfiniteFuture while one waits.
    absl::Time orphaned_since = absl::InfiniteFuture();  // guarded by mu_
    int rendezvous_port = 0;  // rank 0 of a multi-rank trial: the port it serves on
  };
  // The answer of a rank that ended with nobody waiting.
  struct KeptAnswer {
    int device_index = 0;
    v1::RunTrialResponse response;
    absl::Time until;  // dropped after
  };

  // (trial id, attempt, rank): a trial's ranks on this worker run side by
  // side, each its own child; ordered so one trial's ranks are adjacent.
  using ExecutionKey = std::tuple<std::string, int, int>;

  // An attach_only RunTrial: attaches `waiter` to the running rank of the
  // trial attempt on the request's device, or answers with its kept answer;
  // NOT_FOUND (returned, nothing attached) when there is neither.
  absl::Status AttachLocked(const v1::RunTrialRequest& request, const Waiter& waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropExpiredAnswersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // `launcher`: the rank is a launcher trial's (spec is launcher->spec);
  // null: the trial runner's.
  void RunExecution(ExecutionKey key, int device_index, TrialSpec spec, absl::Duration timeout,
                    std::shared_ptr<const LauncherRank> launcher) ABSL_LOCKS_EXCLUDED(mu_);

  // The launcher rank `request` asks for on `device`, or why not.
  absl::StatusOr<std::shared_ptr<const LauncherRank>> LauncherRankFor(
      const v1::RunTrialRequest& request, const RankDevice& device, const TrialSpec& spec) const;

  // A trial on a probed cpu device measured above its peak (MFU > 100%): the
  // probe under-measured it. Raises every cpu device's peak at the trial's
  // precision to what the trial achieved per device and restates the
  // trial's MFU against it.
  void RaisePeakIfBeaten(int device_index, const TrialSpec& spec, TrialResult* result)
      ABSL_LOCKS_EXCLUDED(mu_);

  const WorkerOptions options_;
  std::atomic<uint64_t> model_file_writers_{
      0};  // StoreModelFile calls, naming their temporary files
  CoordinatorGate gate_;
  absl::Mutex mu_;
  std::vector<v1::Device> devices_ ABSL_GUARDED_BY(mu_);  // peaks may be raised
  std::map<ExecutionKey, std::shared_ptr<Execution>> running_ ABSL_GUARDED_BY(mu_);
  std::map<ExecutionKey, KeptAnswer> kept_ ABSL_GUARDED_BY(mu_);
  int threads_ ABSL_GUARDED_BY(mu_) = 0;  // RunExecution threads not yet done
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_WORKER_SERVICE_H_
