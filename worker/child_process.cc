#include "worker/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "worker/rank_environment.h"

extern char** environ;

namespace autoaccel {
namespace {

// What the child reports through its exec pipe when it cannot run: where it
// failed and errno.
struct ExecFailure {
  int step;  // 0 open /dev/null, 1 stdout, 2 stderr, 3 chdir, 4 execve
  int err;
};

}  // namespace

void KillProcessGroup(pid_t pgid, int sig) { ::kill(-pgid, sig); }

int StopAndReap(pid_t pid, absl::Duration grace) {
  KillProcessGroup(pid, SIGTERM);
  int status = 0;
  const absl::Time give_up = absl::Now() + grace;
  while (absl::Now() < give_up) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      KillProcessGroup(pid, SIGKILL);  // stragglers in the group
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  KillProcessGroup(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return status;
}

ChildEnd WatchChild(pid_t pid, const ChildWatch& watch) {
  ChildEnd end;
  while (true) {
    const bool exited = ::waitpid(pid, &end.wait_status, WNOHANG) == pid;
    if (watch.stop && watch.stop(exited)) {
      end.why = ChildEnd::kStopped;
    } else if (exited) {
      end.why = ChildEnd::kExited;
    } else if (absl::Now() >= watch.deadline) {
      end.why = ChildEnd::kTimedOut;
    } else if (watch.cancel && watch.cancel()) {
      end.why = ChildEnd::kCancelled;
    } else {
      absl::SleepFor(watch.poll_interval);
      continue;
    }
    if (!exited) end.wait_status = StopAndReap(pid, watch.grace);
    break;
  }
  KillProcessGroup(pid, SIGKILL);  // nothing it started outlives it
  return end;
}

absl::StatusOr<std::string> FindExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(name, ": not found in PATH"));
}

std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& set,
    const std::vector<std::string>& unset, const RankEnvAllowlist* inherit) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry = *e;
    const absl::string_view name = entry.substr(0, entry.find('='));
    if (inherit != nullptr && !inherit->Allows(name)) continue;
    bool replaced = std::find(unset.begin(), unset.end(), name) != unset.end();
    for (const auto& [n, v] : set) replaced = replaced || n == name;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [n, v] : set) env.push_back(absl::StrCat(n, "=", v));
  return env;
}

absl::StatusOr<pid_t> SpawnChild(std::vector<std::string> args, const SpawnOptions& options) {
  if (args.empty()) return absl::InvalidArgumentError("SpawnChild: no command");
  ASSIGN_OR_RETURN(args[0], FindExecutable(args[0]));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> env_copy;
  std::vector<char*> envp;
  if (options.env != nullptr) {
    env_copy = *options.env;
    for (std::string& e : env_copy) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  char** child_env = options.env != nullptr ? envp.data() : environ;
  const char* out_path = options.stdout_path.c_str();
  const char* err_path = options.stderr_path.c_str();
  const char* workdir = options.workdir.empty() ? nullptr : options.workdir.c_str();
  const bool same_file = options.stdout_path == options.stderr_path;
  const bool new_session = options.new_session;
  const std::vector<int>& ignored_signals = options.ignored_signals;
  const char* input_file = options.input_file.empty() ? nullptr : options.input_file.c_str();
  const int input_fd = options.input_fd;
  // The child writes why it could not exec into this pipe; a successful exec
  // closes it (O_CLOEXEC), so the parent reads nothing.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  // fork + exec rather than posix_spawn: the child must ask for SIGKILL when
  // the daemon dies (PR_SET_PDEATHSIG), so a killed worker leaves no orphan
  // behind. Only async-signal-safe calls between fork and exec.
  pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    ::close(report[0]);
    auto fail = [&](int step) {
      ExecFailure f{step, errno};
      ssize_t ignored = ::write(report[1], &f, sizeof(f));
      (void)ignored;
      ::_exit(127);
    };
    // Own process group: stopping the child stops all it started.
    if (new_session) {
      ::setsid();
    } else {
      ::setpgid(0, 0);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the daemon died before prctl
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);  // the daemon blocks SIGTERM; the child must not
    for (int sig : ignored_signals) ::signal(sig, SIG_IGN);
    int in = ::open("/dev/null", O_RDONLY);
    if (in < 0) fail(0);
    int out = ::open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) fail(1);
    int err = same_file ? out : ::open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err < 0) fail(2);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    if (input_file != nullptr && input_fd > 2) {
      const int input = ::open(input_file, O_RDONLY);  // no O_CLOEXEC: for the program
      if (input < 0) fail(5);
      if (input != input_fd) {
        if (::dup2(input, input_fd) < 0) fail(5);
        ::close(input);
      }
    }
    if (workdir != nullptr && ::chdir(workdir) != 0) fail(3);
    ::execve(argv[0], argv.data(), child_env);
    fail(4);
  }
  ::close(report[1]);
  // Also from the parent, so the group exists before any kill (a new
  // session exists once the exec report below arrives: setsid comes first,
  // and would fail in a child the parent had made a group leader).
  if (!new_session) ::setpgid(pid, pid);
  ExecFailure failure{};
  ssize_t got;
  do {
    got = ::read(report[0], &failure, sizeof(failure));
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(failure))) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    static constexpr const char* kSteps[] = {"cannot open /dev/null",
                                             "cannot open its stdout file",
                                             "cannot open its stderr file",
                                             "cannot enter its working directory",
                                             "cannot execute",
                                             "cannot open its input file"};
    const char* what = failure.step >= 0 && failure.step <= 5 ? kSteps[failure.step] : "?";
    std::string target = failure.step == 1   ? options.stdout_path
                         : failure.step == 2 ? options.stderr_path
                         : failure.step == 3 ? options.workdir
                         : failure.step == 5 ? options.input_file
                                             : std::string(argv[0]);
    return absl::FailedPreconditionError(
        absl::StrCat(args[0], ": ", what, " ", target, ": ", std::strerror(failure.err)));
  }
  return pid;
}

absl::StatusOr<int> RunChildProcess(const std::vector<std::string>& args,
                                    const std::string& stdout_path, const std::string& stderr_path,
                                    absl::Duration timeout) {
  if (args.empty()) return absl::InvalidArgumentError("RunChildProcess: no command");
  SpawnOptions options;
  options.stdout_path = stdout_path;
  options.stderr_path = stderr_path;
  ASSIGN_OR_RETURN(const pid_t pid, SpawnChild(args, options));
  ChildWatch watch;
  watch.deadline = absl::Now() + timeout;
  watch.poll_interval = absl::Milliseconds(20);
  const ChildEnd end = WatchChild(pid, watch);
  if (end.why == ChildEnd::kTimedOut) {
    return absl::DeadlineExceededError(absl::StrCat(args[0], " did not finish within ",
                                                    absl::FormatDuration(timeout), "; stopped it"));
  }
  return end.wait_status;
}

absl::StatusOr<FileTail> ReadFileTail(const std::string& path, int max_lines, int64_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  FileTail tail;
  in.seekg(0, std::ios::end);
  tail.size_bytes = static_cast<int64_t>(in.tellg());
  const int64_t start = std::max<int64_t>(0, tail.size_bytes - max_bytes);
  std::string bytes(static_cast<size_t>(tail.size_bytes - start), '\0');
  in.seekg(start);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": short read"));
  }
  absl::string_view text = bytes;
  // A cut through the middle of a line starts at the next whole one.
  if (start > 0) {
    const size_t newline = text.find('\n');
    text.remove_prefix(newline == absl::string_view::npos ? text.size() : newline + 1);
  }
  // The last `max_lines` lines; a final newline ends the last line, it does
  // not start another.
  size_t begin = text.size();
  const size_t end = !text.empty() && text.back() == '\n' ? text.size() - 1 : text.size();
  int lines = 0;
  for (size_t i = end; i > 0; --i) {
    if (text[i - 1] == '\n' && ++lines == max_lines) {
      begin = i;
      break;
    }
  }
  if (lines < max_lines) begin = 0;
  tail.truncated = start + static_cast<int64_t>(bytes.size() - text.size() + begin) > 0;
  tail.text = std::string(text.substr(begin));
  return tail;
}

std::string TailOfFile(const std::string& path, int max_lines) {
  absl::StatusOr<FileTail> tail = ReadFileTail(path, max_lines, int64_t{1} << 20);
  if (!tail.ok()) return "";
  absl::string_view text = tail->text;
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return std::string(text);
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
    default:  // SIGSEGV, SIGABRT, SIGFPE, ...: the child crashed by itself
      return false;
  }
}

std::string HowChildEnded(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ")");
  }
  return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
}

}  // namespace autoaccel
