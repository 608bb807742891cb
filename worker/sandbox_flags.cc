#include "worker/sandbox_flags.h"

#include <spdlog/spdlog.h>

namespace autoaccel {

void AddSandboxFlags(CLI::App* app, SandboxFlags* flags) {
  app->add_flag("--no-sandbox", flags->off,
                "run trial ranks without the sandbox: a user's TorchScript model or a launcher "
                "script can then read and write whatever this worker's user can (by default each "
                "rank runs under bubblewrap, seeing the system read-only and writing only its "
                "trial directory; docs/SECURITY.md)");
  app->add_option("--sandbox-user", flags->user,
                  "the unprivileged user a worker running as root runs trial ranks as");
  app->add_option("--sandbox-read-only", flags->read_only,
                  "a host path trial ranks may read in the sandbox (repeatable), e.g. a dataset "
                  "or a model cache a launcher script needs");
}

absl::StatusOr<std::shared_ptr<const Sandbox>> SandboxFromFlags(const SandboxFlags& flags,
                                                                const std::string& work_dir,
                                                                const std::string& runner,
                                                                const std::string& python) {
  if (flags.off) {
    spdlog::warn(
        "--no-sandbox: trial ranks run unsandboxed as this worker's user; a user's TorchScript "
        "model or a launcher script can read and write every file that user can");
    return std::shared_ptr<const Sandbox>();
  }
  SandboxOptions options;
  options.user = flags.user;
  options.read_only = flags.read_only;
  options.work_dir = work_dir;
  // The runner and every library it loads, reachable by the rank's user
  // (the loader lists them without running it).
  if (!runner.empty()) {
    options.checks.push_back({"/usr/bin/env", "LD_TRACE_LOADED_OBJECTS=1", runner});
  }
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(options);
  if (!sandbox.ok()) return sandbox.status();
  // Only launcher ranks run it, and each says why it failed: a warning, not
  // a refusal (the worker's own trials still run).
  if (absl::Status s =
          python.empty() ? absl::OkStatus() : (*sandbox)->Check({python, "-c", "pass"});
      !s.ok()) {
    spdlog::warn(
        "--python {} does not run in the trial sandbox, so every launcher rank will fail: {}. "
        "Give a --python whose files it can reach (a venv of /usr/bin/python3, or "
        "--sandbox-read-only its prefix) or --no-sandbox",
        python, std::string(s.message()));
  }
  const SandboxPolicy& policy = (*sandbox)->policy();
  spdlog::info("trial ranks run sandboxed ({}{})", policy.bwrap,
               policy.run_as_user ? " as uid " + std::to_string(policy.uid) : "");
  return std::shared_ptr<const Sandbox>(std::move(*sandbox));
}

}  // namespace autoaccel
