#include "worker/trial_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "trial_contract/json_file.h"
#include "worker/file_names.h"
#include "worker/sandbox.h"

namespace autoaccel {

std::string TrialProcessDir(const TrialSpec& spec, const std::string& work_dir) {
  return absl::StrCat(work_dir, "/", RankFileStem(spec.trial_id, spec.attempt, spec.rank));
}

TrialResult RunTrialProcess(const TrialSpec& given_spec, const TrialProcessOptions& options) {
  namespace fs = std::filesystem;
  TrialResult result;
  result.status = TrialStatus::kFailed;
  TrialSpec spec = given_spec;
  std::error_code ec;
  // Absolute: the sandboxed runner starts in its trial directory.
  if (!spec.model_file.empty()) spec.model_file = fs::absolute(spec.model_file, ec).string();
  const std::string dir = fs::absolute(TrialProcessDir(spec, options.work_dir), ec).string();
  const std::string spec_path = dir + "/spec.json";
  const std::string result_path = dir + "/result.json";
  const std::string log_path = dir + "/trial.log";
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  absl::Status written = ec ? absl::InternalError(absl::StrCat("cannot make the trial directory ",
                                                               dir, ": ", ec.message()))
                            : WriteJsonFile(spec_path, TrialSpecToJson(spec));
  if (written.ok() && options.sandbox != nullptr) written = options.sandbox->GiveToRank(dir);
  if (!written.ok()) {
    result.error = std::string(written.message());
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
  std::vector<std::string> env = ChildEnvironment(vars, unset, options.rank_env);
  SpawnOptions spawn;
  spawn.stdout_path = log_path;
  spawn.stderr_path = log_path;
  spawn.env = &env;
  std::vector<std::string> argv = {options.runner_path, "--spec", spec_path, "--result",
                                   result_path};
  // The trial's ranks on this machine share one /dev/shm (NCCL).
  const std::string shm_key = absl::StrCat(spec.trial_id, "-a", spec.attempt);
  if (options.sandbox != nullptr) {
    RankMounts mounts;
    mounts.trial_dir = dir;
    if (!spec.model_file.empty()) mounts.read_only.push_back(spec.model_file);
    mounts.shm_dir = options.sandbox->AcquireShm(shm_key);
    argv = options.sandbox->Wrap(argv, mounts, &spawn);
  }
  absl::StatusOr<pid_t> started = SpawnChild(argv, spawn);
  if (!started.ok() && options.sandbox != nullptr) options.sandbox->ReleaseShm(shm_key);
  if (!started.ok()) {
    result.error = absl::StrCat("cannot start trial runner: ", started.status().message());
    result.infrastructure = true;
    return result;
  }
  const pid_t pid = *started;

  ChildWatch watch;
  watch.deadline = absl::Now() + options.timeout;
  watch.cancel = options.should_cancel;
  const ChildEnd end = WatchChild(pid, watch);
  int status = end.wait_status;
  const bool timed_out = end.why == ChildEnd::kTimedOut;
  const bool cancelled = end.why == ChildEnd::kCancelled;
  if (options.sandbox != nullptr) {
    options.sandbox->ReleaseShm(shm_key);
    status = RankWaitStatus(status);
  }

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
  std::string how = WIFSIGNALED(status) ? HowChildEnded(status)
                                        : absl::StrCat(HowChildEnded(status), " without a result");
  result.error =
      absl::StrCat("trial runner ", how, "; log ", log_path, ":\n", TailOfFile(log_path, 5));
  return result;
}

}  // namespace autoaccel
