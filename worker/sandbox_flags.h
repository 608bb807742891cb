// The worker's sandbox flags (--no-sandbox, --sandbox-user,
// --sandbox-read-only) and the sandbox they ask for (worker/sandbox.h),
// kept out of worker/main.cc.
#ifndef AUTOACCEL_WORKER_SANDBOX_FLAGS_H_
#define AUTOACCEL_WORKER_SANDBOX_FLAGS_H_

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/sandbox.h"

namespace autoaccel {

struct SandboxFlags {
  bool off = false;  // --no-sandbox
  std::string user = "nobody";
  std::vector<std::string> read_only;
};

// Adds the three flags to the worker's command line.
void AddSandboxFlags(CLI::App* app, SandboxFlags* flags);

// The sandbox every rank runs in, checked at start (Sandbox::Create) with
// `runner` (when not "") in it; null, with a warning in the log, for
// --no-sandbox. The errors of Sandbox::Create: the worker prints them and
// exits 2. `python` (when not "": launchers run it) is tried too, and a
// failure only logged: launcher ranks would fail, with the reason.
absl::StatusOr<std::shared_ptr<const Sandbox>> SandboxFromFlags(const SandboxFlags& flags,
                                                                const std::string& work_dir,
                                                                const std::string& runner,
                                                                const std::string& python);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_SANDBOX_FLAGS_H_
