// Runs one trial rank with a launcher (worker/launchers.h): the user's own
// training script instead of the trial runner. The contract a script sees
// (its trial directory, strategy.json, environment, the metrics protocol)
// is docs/LAUNCHERS.md; how the worker ends a rank is below.
#ifndef AUTOACCEL_WORKER_LAUNCHER_TRIAL_H_
#define AUTOACCEL_WORKER_LAUNCHER_TRIAL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "trial_contract/trial_result.h"
#include "trial_contract/trial_spec.h"
#include "worker/launcher_cache.h"
#include "worker/launchers.h"

namespace autoaccel {

// One rank of a launcher trial, as the worker knows it.
struct LauncherRank {
  // RankSpecFromRequest's spec (trial, attempt, rank and its neighbours on
  // this worker, sizes, strategy, model, memory limit, peak). A
  // torchscript-family model means the job gave no model config.
  TrialSpec spec;
  LauncherDef launcher;
  std::string device_type = "cpu";  // "cpu", "cuda", "musa", ...
  // The ordinals of the trial's devices on this worker in local-rank order
  // (spec.local_device_indices' devices; the visible-devices variable lists
  // them, through the worker's own value of it: VisibleDevicesValue); unused
  // for cpu.
  std::vector<int> device_ordinals;
};

class RankEnvAllowlist;
class Sandbox;

struct LauncherTrialOptions {
  std::string work_dir;  // the rank's trial directory is made under it
  std::string python;    // {python}
  // Runs the rank in this sandbox (worker/sandbox.h): it writes only its
  // trial directory and reads, beyond the system, only what its command
  // needs: the program argv[0] names, {python}'s prefix and venv, the
  // launcher's workdir, the directories of absolute paths in its argv and
  // PYTHONPATH. Null: the script runs as the worker does. Not owned.
  // The worker's variables the rank inherits (worker/rank_environment.h);
  // null: all of them. Not owned.
  const RankEnvAllowlist* rank_env = nullptr;
  const Sandbox* sandbox = nullptr;
  // The launcher's persistent cache (worker/launcher_cache.h): made under
  // cache.root, bound writable and named by the caches' variables.
  LauncherCache cache;
  absl::Duration timeout = absl::Minutes(10);
  // Between SIGTERM and SIGKILL when the worker stops a rank.
  absl::Duration grace = absl::Seconds(5);
  absl::Duration poll_interval = absl::Milliseconds(100);
  // Polled with the metrics; true stops the rank: CANCELLED.
  std::function<bool()> should_cancel;
};

// The rank's trial directory: WORK_DIR/<RankFileStem>.
std::string LauncherTrialDir(const LauncherRank& rank, const std::string& work_dir);

// Runs the rank: makes its trial directory afresh (strategy.json, the
// launcher format's files exported with file_dir = that directory), expands
// the argv (worker/launchers.h ExpandArgv), starts it in its own process
// group in the launcher's workdir with the contract's environment, and
// every poll_interval reads the metrics file, the process group's RSS, the
// clock and should_cancel. The rank ends:
//   - SUCCEEDED once warm-up + measured steps are reported (the worker then
//     stops it: SIGTERM, SIGKILL after `grace`), or when it exits by itself
//     after reporting them; metrics from the measured steps (RankMetrics).
//   - OOM: an oom event; an exit with an out-of-memory message on stderr;
//     on cpu, the group's RSS above spec.memory_limit_bytes.
//   - FAILED: a malformed metrics line (stopped); an exit before enough
//     steps ("script exited with code 1 after 2 of 7 steps; stderr: ...");
//     an export that fails or rejects the strategy; a file placeholder
//     this export did not write. `infrastructure` also set when the rank
//     could not be started, was killed from outside, or the trial
//     directory could not be written.
//   - TIMEOUT after options.timeout, CANCELLED on should_cancel (stopped).
// Never throws; blocks the calling thread. Thread-safe (ranks run side by
// side, each in its own directory).
TrialResult RunLauncherRank(const LauncherRank& rank, const LauncherTrialOptions& options);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_LAUNCHER_TRIAL_H_
