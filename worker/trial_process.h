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
#include "worker/child_process.h"  // RunChildProcess, TailOfFile, EndedFromOutside

namespace autoaccel {

// How long a rank may run when its RunTrialRequest gives no timeout.
inline constexpr absl::Duration kDefaultTrialTimeout = absl::Minutes(10);

class RankEnvAllowlist;
class Sandbox;

struct TrialProcessOptions {
  std::string runner_path;  // the autoaccel-trial executable
  std::string work_dir;     // the rank's trial directory is made under it
  // Runs the rank in this sandbox (worker/sandbox.h): it can write only its
  // trial directory and read only spec.model_file of the work dir. Null:
  // the runner runs as the worker does. Not owned.
  const Sandbox* sandbox = nullptr;
  // The worker's variables the rank inherits (worker/rank_environment.h);
  // null: all of them. Not owned.
  const RankEnvAllowlist* rank_env = nullptr;
  absl::Duration timeout = kDefaultTrialTimeout;
  // Polled every 100 ms while the child runs; returning true stops the child
  // and the trial ends CANCELLED.
  std::function<bool()> should_cancel;
};

// Writes `spec` to a file, starts the runner in its own process group (with
// RANK, WORLD_SIZE, LOCAL_RANK and, for world_size > 1, MASTER_ADDR and
// MASTER_PORT from the spec in its environment; its files spec.json,
// result.json and trial.log in its trial directory WORK_DIR/<RankFileStem>
// (worker/file_names.h), made afresh, one per rank), waits
// for it (killing the whole group on timeout or cancellation: SIGTERM, then
// SIGKILL after 3 s) and turns what happened into a TrialResult:
// the runner's own result file if it wrote one; TIMEOUT or CANCELLED when we
// stopped it; FAILED with the exit code or signal and the tail of its log
// otherwise. A runner that could not be written for, started or executed,
// or that was ended by a signal someone else sent (EndedFromOutside), gives
// FAILED with `infrastructure` set. Blocks the calling thread. Thread-safe.
TrialResult RunTrialProcess(const TrialSpec& spec, const TrialProcessOptions& options);

// The rank's trial directory: WORK_DIR/<RankFileStem>.
std::string TrialProcessDir(const TrialSpec& spec, const std::string& work_dir);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_TRIAL_PROCESS_H_
