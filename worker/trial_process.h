// Runs one trial rank as a child process (the LibTorch trial runner) so that
// a crash, abort or out-of-memory in the trial never reaches the daemon.
#ifndef AUTOACCEL_WORKER_TRIAL_PROCESS_H_
#define AUTOACCEL_WORKER_TRIAL_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trial_contract/trial_result.h"
#include "trial_contract/trial_spec.h"

namespace autoaccel {

// How long a rank may run when its RunTrialRequest gives no timeout.
inline constexpr absl::Duration kDefaultTrialTimeout = absl::Minutes(10);

struct TrialProcessOptions {
  std::string runner_path;  // the autoaccel-trial executable
  std::string work_dir;     // spec, result and log files go here
  absl::Duration timeout = kDefaultTrialTimeout;
  // Polled every 100 ms while the child runs; returning true stops the child
  // and the trial ends CANCELLED.
  std::function<bool()> should_cancel;
};

// Writes `spec` to a file, starts the runner in its own process group (with
// RANK, WORLD_SIZE, LOCAL_RANK and, for world_size > 1, MASTER_ADDR and
// MASTER_PORT from the spec in its environment; work files named by
// RankFileStem (worker/file_names.h), one set per rank), waits
// for it (killing the whole group on timeout or cancellation: SIGTERM, then
// SIGKILL after 3 s) and turns what happened into a TrialResult:
// the runner's own result file if it wrote one; TIMEOUT or CANCELLED when we
// stopped it; FAILED with the exit code or signal and the tail of its log
// otherwise. A runner that could not be written for, started or executed,
// or that was ended by a signal someone else sent (EndedFromOutside), gives
// FAILED with `infrastructure` set. Blocks the calling thread. Thread-safe.
TrialResult RunTrialProcess(const TrialSpec& spec, const TrialProcessOptions& options);

// True when a runner's wait status says it did not end by itself: exit code
// 127 (it could not be executed) or a signal that only comes from outside
// (SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT: an operator, a cluster manager
// or the kernel's out-of-memory killer). A crash (SIGSEGV, SIGABRT, ...) or
// another exit code is the trial's own.
bool EndedFromOutside(int wait_status);

// Runs `args` (args[0]: a path, or a name looked up in $PATH) to completion,
// the way a trial runs (own process group, parent-death signal, stdin from
// /dev/null), with stdout and stderr written to the given files (truncated;
// they may be the same file). Returns the wait status (as waitpid gives it;
// exit code 127 when it could not be executed); NOT_FOUND when args[0] is
// not in $PATH; DEADLINE_EXCEEDED when it ran past `timeout` and was killed;
// INTERNAL when it could not be started. Blocks. Thread-safe.
absl::StatusOr<int> RunChildProcess(const std::vector<std::string>& args,
                                    const std::string& stdout_path, const std::string& stderr_path,
                                    absl::Duration timeout);

// Last `max_lines` lines of a text file ("" if unreadable).
std::string TailOfFile(const std::string& path, int max_lines);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_TRIAL_PROCESS_H_
