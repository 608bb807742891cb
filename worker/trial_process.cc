#include "worker/trial_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "trial_contract/json_file.h"
#include "worker/file_names.h"

extern char** environ;

namespace autoaccel {
namespace {

void KillGroup(pid_t pid, int sig) { ::kill(-pid, sig); }

// Stops the child's process group: SIGTERM, then SIGKILL if it lingers.
// Returns the wait status.
int StopAndReap(pid_t pid) {
  KillGroup(pid, SIGTERM);
  int status = 0;
  const absl::Time give_up = absl::Now() + absl::Seconds(3);
  while (absl::Now() < give_up) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      KillGroup(pid, SIGKILL);  // stragglers in the group
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  KillGroup(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return status;
}

// `name` itself when it holds a '/', else the first executable of that name
// in $PATH.
absl::StatusOr<std::string> FindExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(name, ": not found in PATH"));
}

// This process's environment with `set` replacing (or adding) variables of
// those names and `unset` removed, as "NAME=VALUE" strings.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& set,
    const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry = *e;
    const absl::string_view name = entry.substr(0, entry.find('='));
    bool replaced = std::find(unset.begin(), unset.end(), name) != unset.end();
    for (const auto& [n, v] : set) replaced = replaced || n == name;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [n, v] : set) env.push_back(absl::StrCat(n, "=", v));
  return env;
}

// Starts `args` (args[0]: a path, or a name looked up in PATH) in a process
// group of its own, stdin from /dev/null, stdout and stderr to the files at
// the given paths (truncated; they may be the same file). `env`: the
// child's whole environment; nullptr inherits this process's.
absl::StatusOr<pid_t> Spawn(std::vector<std::string> args, const std::string& stdout_path,
                            const std::string& stderr_path,
                            std::vector<std::string>* env = nullptr) {
  ASSIGN_OR_RETURN(args[0], FindExecutable(args[0]));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<char*> envp;
  if (env != nullptr) {
    for (std::string& e : *env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  char** child_env = env != nullptr ? envp.data() : environ;
  const bool same_file = stdout_path == stderr_path;
  const pid_t parent = ::getpid();
  // fork + exec rather than posix_spawn: the child must ask for SIGKILL when
  // the daemon dies (PR_SET_PDEATHSIG), so a killed worker leaves no orphan
  // trial behind. Only async-signal-safe calls between fork and exec.
  pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);  // own process group: stopping the trial stops all it started
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the daemon died before prctl
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);  // the daemon blocks SIGTERM; the trial must not
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = same_file ? out : ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execve(argv[0], argv.data(), child_env);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  return pid;
}

}  // namespace

absl::StatusOr<int> RunChildProcess(const std::vector<std::string>& args,
                                    const std::string& stdout_path, const std::string& stderr_path,
                                    absl::Duration timeout) {
  if (args.empty()) return absl::InvalidArgumentError("RunChildProcess: no command");
  ASSIGN_OR_RETURN(const pid_t pid, Spawn(args, stdout_path, stderr_path));
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (absl::Now() >= deadline) {
      StopAndReap(pid);
      return absl::DeadlineExceededError(absl::StrCat(
          args[0], " did not finish within ", absl::FormatDuration(timeout), "; stopped it"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  KillGroup(pid, SIGKILL);  // nothing it started outlives it
  return status;
}

std::string TailOfFile(const std::string& path, int max_lines) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  return absl::StrJoin(lines, "\n");
}

bool EndedFromOutside(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status) == 127;  // exec failed
  if (!WIFSIGNALED(wait_status)) return false;
  switch (WTERMSIG(wait_status)) {
    case SIGKILL:
    case SIGTERM:
    case SIGINT:
    case SIGHUP:
    case SIGQUIT:
      return true;
    default:  // SIGSEGV, SIGABRT, SIGFPE, ...: the trial crashed by itself
      return false;
  }
}

TrialResult RunTrialProcess(const TrialSpec& spec, const TrialProcessOptions& options) {
  TrialResult result;
  result.status = TrialStatus::kFailed;
  const std::string base =
      absl::StrCat(options.work_dir, "/", RankFileStem(spec.trial_id, spec.attempt, spec.rank));
  const std::string spec_path = base + ".spec.json";
  const std::string result_path = base + ".result.json";
  const std::string log_path = base + ".log";
  ::unlink(result_path.c_str());
  if (absl::Status s = WriteJsonFile(spec_path, TrialSpecToJson(spec)); !s.ok()) {
    result.error = std::string(s.message());
    result.infrastructure = true;  // the worker's disk, not the strategy
    return result;
  }

  // The rank's place in its gang, as torch.distributed's launchers set it;
  // MASTER_* only for a multi-rank trial (nothing to meet otherwise).
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", absl::StrCat(spec.rank)},
      {"WORLD_SIZE", absl::StrCat(spec.world_size)},
      {"LOCAL_RANK", absl::StrCat(spec.local_rank)}};
  std::vector<std::string> unset;
  if (spec.world_size > 1) {
    vars.emplace_back("MASTER_ADDR", spec.master_addr);
    vars.emplace_back("MASTER_PORT", absl::StrCat(spec.master_port));
  } else {
    unset = {"MASTER_ADDR", "MASTER_PORT"};
  }
  std::vector<std::string> env = ChildEnvironment(vars, unset);
  absl::StatusOr<pid_t> started =
      Spawn({options.runner_path, "--spec", spec_path, "--result", result_path}, log_path, log_path,
            &env);
  if (!started.ok()) {
    result.error = absl::StrCat("cannot start trial runner: ", started.status().message());
    result.infrastructure = true;
    return result;
  }
  const pid_t pid = *started;

  const absl::Time deadline = absl::Now() + options.timeout;
  int status = 0;
  bool timed_out = false, cancelled = false;
  while (true) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (absl::Now() >= deadline) {
      timed_out = true;
      status = StopAndReap(pid);
      break;
    }
    if (options.should_cancel && options.should_cancel()) {
      cancelled = true;
      status = StopAndReap(pid);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  KillGroup(pid, SIGKILL);  // nothing of the trial outlives it

  if (timed_out) {
    result.status = TrialStatus::kTimeout;
    result.error =
        absl::StrCat("trial exceeded its ", absl::FormatDuration(options.timeout), " timeout");
    return result;
  }
  if (cancelled) {
    result.status = TrialStatus::kCancelled;
    result.error = "cancelled";
    return result;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(result_path);
    if (j.ok()) {
      absl::StatusOr<TrialResult> parsed = TrialResultFromJson(*j);
      if (parsed.ok()) return *parsed;
      result.error = std::string(parsed.status().message());
      return result;
    }
  }
  result.infrastructure = EndedFromOutside(status);
  std::string how = WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status),
                                                       " (", strsignal(WTERMSIG(status)), ")")
                                        : absl::StrCat("exited with code ", WEXITSTATUS(status),
                                                       " without a result");
  result.error =
      absl::StrCat("trial runner ", how, "; log ", log_path, ":\n", TailOfFile(log_path, 5));
  return result;
}

}  // namespace autoaccel
