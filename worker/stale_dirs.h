// What a worker killed without a chance to clean up (SIGKILL, a crash, the
// machine's OOM killer) leaves behind, swept by the next worker started on
// the same work dir: the dead worker's sandbox directory
// (WORK_DIR/sandbox-PID: its /etc files for the ranks) and the shared-memory
// directories of its trials (/dev/shm/autoaccel-PID-*, worker/sandbox.h
// AcquireShm), which would otherwise hold their memory until a reboot.
//
// Only what it can prove belongs to a dead worker of its own work dir: a
// sandbox-PID directory there whose PID is no live autoaccel-worker (gone,
// or the number reused by another program), and the shared-memory
// directories of that same PID. A worker's ranks die with it
// (PR_SET_PDEATHSIG, bwrap --die-with-parent), so nothing still uses them.
//
// Call once at start, before the worker makes its own sandbox.
#ifndef AUTOACCEL_WORKER_STALE_DIRS_H_
#define AUTOACCEL_WORKER_STALE_DIRS_H_

#include <sys/types.h>

#include <string>

namespace autoaccel {

struct SweptDirs {
  int sandbox = 0;  // WORK_DIR/sandbox-PID directories removed
  int shm = 0;      // SHM_ROOT/autoaccel-PID-* directories removed
};

// Removes the dead workers' directories as above (`shm_root`: /dev/shm, or a
// test's folder) and says how many.
SweptDirs SweepDeadWorkersDirs(const std::string& work_dir,
                               const std::string& shm_root = "/dev/shm");

// Removes worker `pid`'s sandbox directory in `work_dir` and its trials'
// shared-memory directories: what a stopping worker calls for itself (its
// ranks are stopped by then; a Sandbox still referenced by a late thread
// would otherwise leave them).
SweptDirs RemoveWorkerDirs(pid_t pid, const std::string& work_dir,
                           const std::string& shm_root = "/dev/shm");

// Whether `pid` is a running autoaccel-worker (its /proc comm).
bool IsLiveWorker(pid_t pid);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_STALE_DIRS_H_
