// The sandbox every trial rank runs in. A rank runs a user's code (a
// TorchScript model is a program: torch.from_file reads and writes files)
// or an operator's script, so it gets a file system of its own:
//   - read-only: /usr (and the merged-/usr links /bin, /lib, ...), /sys, the
//     few /etc files a program needs to load libraries and resolve hosts,
//     and the paths the rank's command needs (the runner binary and its
//     LibTorch libraries; Python's prefix, its venv and the script's
//     directory), plus --sandbox-read-only paths;
//   - writable: its trial directory (also $HOME) and a private /tmp;
//   - a fresh /dev with the accelerators' device nodes (/dev/nvidia*, ...);
//     a /proc that shows only the rank's processes (own pid namespace);
//   - nothing else: the worker's work dir (other trials, other users' model
//     files), /root, /home, /etc/shadow are not there at all, and /etc/passwd
//     is a synthesized one listing root, the rank's user and nobody.
// A worker that runs as root runs each rank as an unprivileged user
// (--sandbox-user, default nobody) with no capabilities and no_new_privs; its
// trial directory is handed to that user.
// The network is shared: a gang's ranks meet over TCP.
//
// How: bubblewrap (Debian's `bubblewrap`, /usr/bin/bwrap), not namespaces of
// our own. bwrap is the audited tool Flatpak uses for exactly this (mount
// namespace, pivot_root onto a tmpfs, binds, a pid namespace with a reaping
// init, --die-with-parent); doing the same between fork and exec, where only
// async-signal-safe calls are allowed, would be a few hundred lines of
// security-critical code of ours. As root, bwrap sets up the mounts and
// `setpriv` (util-linux) drops to the rank's user inside, so bind sources the
// user could not reach (a Python under /root/.pyenv) still resolve; as another
// user, bwrap builds the same inside a user namespace.
//
// What stays the same for the worker: the rank is still one process group
// (SpawnChild with new_session), so StopAndReap's SIGTERM reaches the rank's
// own processes directly; bwrap itself ignores SIGTERM and SIGINT (it
// outlives the rank, keeping the grace period) and the command gets them back
// through `env --default-signal`; SIGKILL ends bwrap and with it the pid
// namespace. The rank's processes keep the group id, so ProcessGroupRssBytes
// counts them (and bwrap's two small processes). bwrap reports a rank killed
// by signal N as exit code 128+N: RankWaitStatus turns it back.
#ifndef AUTOACCEL_WORKER_SANDBOX_H_
#define AUTOACCEL_WORKER_SANDBOX_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/child_process.h"

namespace autoaccel {

// What a sandbox exposes of this machine, found once (Sandbox::Create) and
// fixed in unit tests.
struct SandboxPolicy {
  std::string bwrap;    // absolute path
  std::string env;      // /usr/bin/env (coreutils >= 8.31: --default-signal)
  std::string setpriv;  // /usr/bin/setpriv; used when run_as_user
  // The worker is root: ranks run as uid/gid (setpriv inside the sandbox).
  bool run_as_user = false;
  uid_t uid = 65534;
  gid_t gid = 65534;
  // Top-level links of a merged-/usr system ("/bin" -> "usr/bin"),
  // recreated as links.
  std::vector<std::pair<std::string, std::string>> root_links;
  // Host paths bound read-only at the same place (those that exist of
  // /usr, /etc/ld.so.cache, ... and --sandbox-read-only).
  std::vector<std::string> read_only;
  // Synthesized files bound at /etc/passwd and /etc/group ("" = none).
  std::string passwd_file;
  std::string group_file;
  // The ranks' seccomp filter (worker/seccomp_filter.h) as BPF, which bwrap
  // reads from fd kSeccompFd ("" = none).
  std::string seccomp_file;
};

// The descriptor number the seccomp filter reaches bwrap on.
inline constexpr int kSeccompFd = 10;

// One rank's part of its sandbox. Paths are absolute.
struct RankMounts {
  std::string trial_dir;  // writable; $HOME; the working directory unless `workdir`
  std::string workdir;    // "" = trial_dir
  // What the command needs to run: files or directories, bound read-only.
  // A path through a symlink is bound at both the link and its target.
  std::vector<std::string> read_only;
  // Device nodes bound read-write (/dev/nvidia0, /dev/nvidiactl, ...).
  std::vector<std::string> devices;
  // Bound at /dev/shm so a trial's ranks on this machine share it (NCCL's
  // shared-memory transport); "" = a private /dev/shm.
  std::string shm_dir;
  // Writable and kept between trials: the launcher's cache
  // (worker/launcher_cache.h), bound at its own place; "" = none.
  std::string cache_dir;
};

// The bwrap argv that runs `command` (argv[0] absolute) in the sandbox.
// Pure.
std::vector<std::string> BubblewrapArgv(const SandboxPolicy& policy, const RankMounts& mounts,
                                        const std::vector<std::string>& command);

// The wait status of the command inside, from bwrap's: an exit code 128+N
// (N a signal number) becomes "killed by signal N", so EndedFromOutside and
// HowChildEnded read it as they would the command's own. (A command that
// exits with such a code by itself reads the same.) Pure.
int RankWaitStatus(int bwrap_wait_status);

// The paths running the executable `path` reads, to bind read-only: the
// file itself; a Python's prefix (PREFIX/bin/python3 with PREFIX/lib/
// python3.X: its standard library, not any bin/'s parent); the venv a
// Python under bin/ belongs to (pyvenv.cfg) and the directories their
// site-packages name (.pth files, `pip install -e` finders); the shared libraries ldd
// lists outside the system's directories (a library under site-packages
// binds all of site-packages: LibTorch dlopens CUDA's wheels beside it).
// Paths under /usr are left out (bound already). Runs ldd; never fails (an
// unreadable file yields only itself).
std::vector<std::string> ExecutablePaths(const std::string& path);

// Accelerator device nodes present now (/dev/nvidia*, /dev/kfd, /dev/dri,
// /dev/infiniband, ...). Reads /dev.
std::vector<std::string> AcceleratorDeviceNodes();

struct SandboxOptions {
  // The user a root worker runs ranks as (a name or a number).
  std::string user = "nobody";
  // More host paths every rank may read (--sandbox-read-only).
  std::vector<std::string> read_only;
  // The worker's work dir: the synthesized /etc files and the start-up
  // check's trial directory go under WORK_DIR/sandbox.
  std::string work_dir;
  // Start-up check: each command (argv, argv[0] absolute) must exit 0 in
  // the sandbox (Check); /usr/bin/true
  // always runs.
  std::vector<std::vector<std::string>> checks;
};

// A worker's sandbox. Thread-safe after Create (const, apart from the
// shared /dev/shm directories' reference counts under a mutex).
class Sandbox {
 public:
  // Finds bwrap, env and (as root) setpriv and the user, writes the /etc
  // files, and runs the checks in the sandbox. FAILED_PRECONDITION saying
  // what to install or pass (`--no-sandbox`) when bwrap is missing or a
  // check fails (with bwrap's message); INVALID_ARGUMENT for an unknown
  // user or a --sandbox-read-only path that is not absolute or does not
  // exist.
  static absl::StatusOr<std::unique_ptr<Sandbox>> Create(const SandboxOptions& options);
  ~Sandbox();

  const SandboxPolicy& policy() const { return policy_; }

  // Runs `command` (argv[0] absolute or in PATH) in the sandbox as a rank
  // would, in a scratch trial directory, with the ExecutablePaths of its
  // absolute-path arguments bound too: OK when it exits 0 and prints no
  // "=> not found" (the loader's trace of a missing library), else
  // FAILED_PRECONDITION with how it ended and its output's tail. Blocks
  // up to 20 s.
  absl::Status Check(const std::vector<std::string>& command) const;

  // Makes `dir` (and everything in it) the rank's user's when ranks run as
  // another user; OK otherwise. INTERNAL when chown fails.
  absl::Status GiveToRank(const std::string& dir) const;

  // The argv that runs `command` in the sandbox (BubblewrapArgv with the
  // device nodes present now and the command's ExecutablePaths added to
  // mounts.read_only), and `spawn` set for it (new session, bwrap ignoring
  // SIGTERM/SIGINT). Start it with SpawnChild and read its wait status with
  // RankWaitStatus.
  std::vector<std::string> Wrap(const std::vector<std::string>& command, RankMounts mounts,
                                SpawnOptions* spawn) const;

  // A trial's /dev/shm on this machine, shared by its ranks here: made
  // (under /dev/shm, given to the rank's user) by the first rank that asks
  // and removed when the last one releases it. "" when it cannot be made
  // (the rank then gets a private one).
  std::string AcquireShm(const std::string& trial_key) const;
  void ReleaseShm(const std::string& trial_key) const;

 private:
  explicit Sandbox(SandboxPolicy policy);
  SandboxPolicy policy_;
  struct ShmTable;
  std::unique_ptr<ShmTable> shm_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_SANDBOX_H_
