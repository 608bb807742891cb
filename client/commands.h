// The CLI's commands, written against the generated StubInterface so tests
// can drive them with a fake: each makes its RPCs and returns the process
// exit code; what it prints is rendered by client/render.h. Exit codes:
//   0 success, 1 error (message already printed), 2 bad input of an offline
//   command (export, estimate) or a combination the framework rejects
//   (export), 3 nothing recorded (best; export --job: no best yet; estimate
//   --top: nothing fits), 4 (tune, watch) the job succeeded but its answer
//   rests on partial evidence: trials were lost to infrastructure failures
//   after every retry. Losing the coordinator for longer than
//   --reconnect-for exits 1 ("gave up reconnecting").
// Human output goes to `out`, progress and errors to `err`; with `json` set,
// `out` receives exactly one JSON document.
#ifndef AUTOACCEL_CLIENT_COMMANDS_H_
#define AUTOACCEL_CLIENT_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/watch_retry.h"
#include "proto/autoaccel.grpc.pb.h"

namespace autoaccel {

inline constexpr int kExitBadInput = 2;
inline constexpr int kExitNothingRecorded = 3;
inline constexpr int kExitPartialEvidence = 4;

// The deadline of each request/answer RPC (submit, job, jobs, trials, best,
// workers, cancel): --rpc-timeout.
inline constexpr absl::Duration kDefaultRpcTimeout = absl::Seconds(15);
// How long tune and watch follow a job's stream before they give up (the job
// keeps running; exit 1, "did not answer in time"): --watch-timeout.
inline constexpr absl::Duration kDefaultWatchTimeout = absl::Hours(48);

struct ClientContext {
  v1::TuningService::StubInterface* stub;
  std::string server;  // for messages
  bool json = false;
  std::ostream* out;
  std::ostream* err;
  bool interactive = false;  // redraw a progress line with \r (stderr is a terminal)
  // stdout and stderr are the same file or pipe (2>&1): what went to stderr
  // as progress is not repeated on stdout.
  bool out_is_err = false;
  absl::Duration rpc_timeout = kDefaultRpcTimeout;
  absl::Duration watch_timeout = kDefaultWatchTimeout;
  // How long tune and watch try to reconnect a lost stream (0: they do not;
  // client/watch_retry.h): --reconnect-for.
  absl::Duration reconnect_for = kDefaultReconnectFor;
};

// Every page of ListWorkers, the workers gathered in `*all` with the last
// page's counts and insecurity note. The first error.
grpc::Status ListAllWorkers(const ClientContext& c, v1::ListWorkersResponse* all);

int TuneCommand(const ClientContext& c, const v1::TuneRequest& request, bool watch);
int WatchCommand(const ClientContext& c, const std::string& job_id);
int JobsCommand(const ClientContext& c, int limit);
int JobCommand(const ClientContext& c, const std::string& job_id);
// `include_pruned`: every PRUNED candidate as a row (else counted by kind).
int TrialsCommand(const ClientContext& c, const std::string& job_id, bool include_pruned);
int BestCommand(const ClientContext& c, const v1::QueryStrategiesRequest& request);
// The stored answers with their provenance (`strategies`); 0 even when none.
int StrategiesCommand(const ClientContext& c, const v1::ListStrategiesRequest& request);
int WorkersCommand(const ClientContext& c);
int CancelCommand(const ClientContext& c, const std::string& job_id);
// `logs`: one rank's log files from the worker that ran it (GetTrialLogs).
int LogsCommand(const ClientContext& c, const v1::GetTrialLogsRequest& request);

// For the commands written in files of their own (client/*_command.cc).
// One clear line on `err` (and the error JSON with --json) for a failed RPC;
// returns 1.
int RpcError(const ClientContext& c, const grpc::Status& s);
// The job, and every trial of it page by page (PRUNED candidates only when
// asked), each RPC under c.rpc_timeout.
grpc::Status FetchJob(const ClientContext& c, const std::string& job_id, v1::Job* job);
grpc::Status FetchTrials(const ClientContext& c, const std::string& job_id, bool include_pruned,
                         std::vector<v1::Trial>* trials);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_COMMANDS_H_
