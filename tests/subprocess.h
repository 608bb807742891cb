// Test helper: child processes with captured output.
#ifndef AUTOACCEL_TESTS_SUBPROCESS_H_
#define AUTOACCEL_TESTS_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace autoaccel::testing {

// A child process whose stdout and stderr go to files in `dir`. Killed
// (SIGKILL) on destruction if still running.
class Subprocess {
 public:
  Subprocess(std::vector<std::string> argv, const std::string& dir, const std::string& name);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits until stdout contains a line with `needle`; returns that line, or
  // "" after `timeout` or if the process exited.
  std::string WaitForLine(const std::string& needle, absl::Duration timeout);
  // Sends `sig` and waits for the exit; returns the wait status.
  int Signal(int sig);
  // Waits for the exit (up to `timeout`, then SIGKILL); returns the exit
  // code, or 128 + signal.
  int Wait(absl::Duration timeout);
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string out_path_, err_path_;
};

// Runs a command to completion; returns its exit code and fills stdout/stderr.
int RunCommand(const std::vector<std::string>& argv, const std::string& dir, std::string* out,
               std::string* err, absl::Duration timeout);

// "listening on HOST:PORT" → "HOST:PORT" ("" if absent).
std::string AddressFromLine(const std::string& line);

// A loopback TCP port nobody listens on right now (the kernel's choice; it
// may be taken again before the caller binds it). 0 if none was found.
int FreePort();

// A fresh temporary directory.
std::string MakeTempDir(const std::string& prefix);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

}  // namespace autoaccel::testing

#endif  // AUTOACCEL_TESTS_SUBPROCESS_H_
