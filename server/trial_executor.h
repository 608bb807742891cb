// How the coordinator reaches a worker's WorkerService: one RunTrial per rank
// of a trial, CancelTrial to stop a trial's ranks on a worker, and
// ReadRankLogs for `autoaccel logs`. The gRPC
// implementation is server/grpc_executor.h; tests substitute their own.
#ifndef AUTOACCEL_SERVER_TRIAL_EXECUTOR_H_
#define AUTOACCEL_SERVER_TRIAL_EXECUTOR_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

// Where a rank goes: the worker's address, whether it serves TLS, and the
// session token it was given at registration (sent as a bearer token; the
// worker refuses calls without it).
struct WorkerEndpoint {
  std::string address;
  std::string session_token;
  bool tls = false;
};

// Implementations are thread-safe: the job manager calls them from its
// scheduler thread and from the threads that deliver earlier answers.
class TrialExecutor {
 public:
  using Done = std::function<void(absl::Status, v1::RunTrialResponse)>;
  virtual ~TrialExecutor() = default;
  // Starts one rank at the worker `to`. `done` runs exactly once, on
  // any thread, possibly before RunTrial returns: callers must not hold locks
  // that `done` takes. A non-OK status means the rank's result never came
  // back (UNAVAILABLE: the worker could not be reached; DEADLINE_EXCEEDED:
  // no answer within `rpc_timeout`).
  virtual void RunTrial(const WorkerEndpoint& to, const v1::RunTrialRequest& request,
                        absl::Duration rpc_timeout, Done done) = 0;
  // Best effort; errors are ignored (the worker may be gone).
  virtual void CancelTrial(const WorkerEndpoint& to, const v1::CancelTrialRequest& request) = 0;
  // Sends a torchscript job's model file to the worker `to`, which keeps it
  // for the RunTrial calls that name its digest (server/
  // model_file_delivery.h); `done` runs exactly once, on any thread, with
  // the worker's answer or the call's error. The default answers
  // UNIMPLEMENTED (executors of tests that run no torchscript job).
  using StoreDone = std::function<void(absl::Status)>;
  virtual void StoreModelFile(const WorkerEndpoint& to, v1::StoreModelFileRequest request,
                              absl::Duration rpc_timeout, StoreDone done) {
    (void)to, (void)request, (void)rpc_timeout;
    done(absl::UnimplementedError("this coordinator cannot send model files"));
  }
  // A rank's log files from the worker that ran it (`autoaccel logs`);
  // `done` runs exactly once, on any thread, with the worker's answer or
  // its error (UNAVAILABLE, DEADLINE_EXCEEDED after `rpc_timeout`, or the
  // worker's own: NOT_FOUND for a directory that is gone). The default
  // answers UNIMPLEMENTED (executors of tests that never read logs).
  using LogsDone = std::function<void(absl::StatusOr<v1::RankLogs>)>;
  virtual void ReadRankLogs(const WorkerEndpoint& to, const v1::ReadRankLogsRequest& request,
                            absl::Duration rpc_timeout, LogsDone done) {
    (void)to, (void)request, (void)rpc_timeout;
    done(absl::UnimplementedError("this coordinator cannot read trial logs"));
  }
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_TRIAL_EXECUTOR_H_
