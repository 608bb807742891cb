// Starting and stopping the worker's child processes — trial runners,
// launcher ranks (users' scripts), nvidia-smi and the peak probe — in one
// place: each child gets a process group of its own (so stopping it stops
// everything it started), SIGKILL when the daemon dies, stdin from
// /dev/null and its output in files. Thread-safe; the functions that wait
// block the calling thread.
#ifndef AUTOACCEL_WORKER_CHILD_PROCESS_H_
#define AUTOACCEL_WORKER_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace autoaccel {

class RankEnvAllowlist;

struct SpawnOptions {
  // Where the child's stdout and stderr go (truncated; may be one file).
  std::string stdout_path;
  std::string stderr_path;
  // The child's whole environment ("NAME=VALUE"); nullptr: this process's.
  const std::vector<std::string>* env = nullptr;
  // The child's working directory; "": this process's.
  std::string workdir;
  // The child calls setsid(): a session (and process group) of its own, with
  // no controlling terminal it could inject keystrokes into (a sandboxed
  // rank, worker/sandbox.h). Otherwise only a process group of its own.
  bool new_session = false;
  // Signals the started program ignores (SIG_IGN survives exec and is
  // inherited by what it starts): the sandbox's bwrap ignores SIGTERM so
  // that it outlives the rank it runs.
  std::vector<int> ignored_signals;
  // A file the child gets open (read-only) at descriptor `input_fd` (> 2),
  // e.g. the seccomp filter bwrap reads; "" = none.
  std::string input_file;
  int input_fd = -1;
};

// Starts `args` (args[0]: a path, or a name looked up in $PATH) in a new
// process group (or session: new_session) whose id is the returned pid. NOT_FOUND when args[0] is
// not in $PATH; FAILED_PRECONDITION "cannot execute X: why" when the exec itself fails (not
// executable, a missing interpreter, a workdir that cannot be entered, output files that cannot be
// opened); INTERNAL when fork fails. The caller must reap the child (waitpid or StopAndReap).
absl::StatusOr<pid_t> SpawnChild(std::vector<std::string> args, const SpawnOptions& options);

// Sends `sig` to the process group `pgid`.
void KillProcessGroup(pid_t pgid, int sig);

// Stops the child `pid` and its group: SIGTERM, then SIGKILL after `grace`
// if the child lingers (and SIGKILL to the group's stragglers once it is
// gone). Returns the child's wait status.
int StopAndReap(pid_t pid, absl::Duration grace);

// How to watch a running child (WatchChild).
struct ChildWatch {
  // When it is stopped for running too long.
  absl::Time deadline = absl::InfiniteFuture();
  absl::Duration poll_interval = absl::Milliseconds(100);
  // Between SIGTERM and SIGKILL when it is stopped (StopAndReap).
  absl::Duration grace = absl::Seconds(3);
  // Asked at every poll, with whether the child has exited (its wait status
  // is then final), before the deadline is looked at: true ends the watch
  // (ChildEnd::kStopped), stopping the child if it still runs. Null: never.
  std::function<bool(bool exited)> stop;
  // Asked at every poll while the child runs, after the deadline: true
  // cancels it (ChildEnd::kCancelled). Null: never.
  std::function<bool()> cancel;
};

// How a watched child's watch ended, and the child's wait status.
struct ChildEnd {
  enum Why { kExited, kStopped, kTimedOut, kCancelled };
  Why why = kExited;
  int wait_status = 0;
};

// Watches the child `pid` (SpawnChild's) until it exits, `watch.stop` says
// so, its deadline passes or `watch.cancel` says so; a child still running
// then is stopped (StopAndReap with the grace). Either way the child is
// reaped and its whole group SIGKILLed: nothing it started outlives it.
// Blocks the calling thread; the callbacks run on it.
ChildEnd WatchChild(pid_t pid, const ChildWatch& watch);

// This process's environment (only the variables `inherit` allows, when
// given: a trial rank's, worker/rank_environment.h) with `set` replacing (or
// adding) variables of those names and `unset` removed, as "NAME=VALUE"
// strings.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& set,
    const std::vector<std::string>& unset, const RankEnvAllowlist* inherit = nullptr);

// `name` itself when it holds a '/', else the first executable of that name
// in $PATH; NOT_FOUND otherwise.
absl::StatusOr<std::string> FindExecutable(const std::string& name);

// Runs `args` to completion the way a trial runs (SpawnChild), with stdout
// and stderr written to the given files. Returns the wait status; NOT_FOUND
// or FAILED_PRECONDITION as SpawnChild; DEADLINE_EXCEEDED when it ran past
// `timeout` and was killed; INTERNAL when it could not be started.
absl::StatusOr<int> RunChildProcess(const std::vector<std::string>& args,
                                    const std::string& stdout_path, const std::string& stderr_path,
                                    absl::Duration timeout);

// True when a child's wait status says it did not end by itself: exit code
// 127 (it could not be executed) or a signal that only comes from outside
// (SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT: an operator, a cluster manager
// or the kernel's out-of-memory killer). A crash (SIGSEGV, SIGABRT, ...) or
// another exit code is the child's own.
bool EndedFromOutside(int wait_status);

// "exited with code N" / "was killed by signal N (Name)".
std::string HowChildEnded(int wait_status);

// The last `max_lines` lines of the file at `path`, read from its end (at
// most `max_bytes` of it; a line cut by that limit is left out), the whole
// file's size, and whether anything before the lines returned was left out.
// NOT_FOUND when the file does not exist; INTERNAL when it cannot be read.
struct FileTail {
  std::string text;
  int64_t size_bytes = 0;
  bool truncated = false;
};
absl::StatusOr<FileTail> ReadFileTail(const std::string& path, int max_lines, int64_t max_bytes);

// Last `max_lines` lines of a text file, without the final newline, from at
// most its last MiB ("" if unreadable).
std::string TailOfFile(const std::string& path, int max_lines);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_CHILD_PROCESS_H_
