#include "tests/subprocess.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace autoaccel::testing {

Subprocess::Subprocess(std::vector<std::string> argv, const std::string& dir,
                       const std::string& name)
    : out_path_(dir + "/" + name + ".out"), err_path_(dir + "/" + name + ".err") {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&actions);
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
}

std::string Subprocess::WaitForLine(const std::string& needle, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    std::istringstream in(Stdout());
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(needle) != std::string::npos) return line;
    }
    if (!reaped_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    if (reaped_) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

int Subprocess::Signal(int sig) {
  if (!reaped_) {
    ::kill(pid_, sig);
    ::waitpid(pid_, &status_, 0);
    reaped_ = true;
  }
  return status_;
}

int Subprocess::Wait(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!reaped_ && absl::Now() < end) {
    if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
      reaped_ = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!reaped_) Signal(SIGKILL);
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

std::string Subprocess::Stdout() const { return ReadFile(out_path_); }
std::string Subprocess::Stderr() const { return ReadFile(err_path_); }

int RunCommand(const std::vector<std::string>& argv, const std::string& dir, std::string* out,
               std::string* err, absl::Duration timeout) {
  static int counter = 0;
  Subprocess p(argv, dir, "cmd" + std::to_string(++counter));
  int code = p.Wait(timeout);
  if (out) *out = p.Stdout();
  if (err) *err = p.Stderr();
  return code;
}

std::string AddressFromLine(const std::string& line) {
  const std::string key = "listening on ";
  size_t at = line.find(key);
  if (at == std::string::npos) return "";
  std::string rest = line.substr(at + key.size());
  return rest.substr(0, rest.find(' '));
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : "/tmp") +
                        "/" + prefix + "XXXXXX";
  char* made = ::mkdtemp(pattern.data());
  return made ? std::string(made) : "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

}  // namespace autoaccel::testing
