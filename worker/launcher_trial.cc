#include "worker/launcher_trial.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "export/exporter.h"
#include "trial_contract/json_file.h"
#include "worker/accelerators.h"
#include "worker/child_process.h"
#include "worker/file_names.h"
#include "worker/launcher_paths.h"
#include "worker/metrics_file.h"
#include "worker/process_tree_memory.h"
#include "worker/sandbox.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;

constexpr int kStderrLinesInReason = 5;
// What a script prints when it runs out of memory (PyTorch's CUDA and
// accelerator allocators, torch.OutOfMemoryError, C++'s new).
constexpr absl::string_view kOomMarks[] = {"CUDA out of memory", "OutOfMemoryError",
                                           "out of memory", "std::bad_alloc"};

TrialResult Failed(std::string why, bool infrastructure = false) {
  TrialResult r;
  r.status = TrialStatus::kFailed;
  r.error = std::move(why);
  r.infrastructure = infrastructure;
  return r;
}

bool HasModelConfig(const TrialSpec& spec) { return !spec.model.IsTorchScript(); }

absl::Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The export of the launcher's format into `dir`, or the reason it cannot
// run this strategy.
absl::StatusOr<std::vector<ExportedFile>> ExportFiles(const LauncherRank& rank,
                                                      const std::string& dir) {
  std::vector<ExportedFile> files;
  if (rank.launcher.format.empty()) return files;
  const TrialSpec& spec = rank.spec;
  ExportInput in;
  in.strategy = spec.strategy;
  in.world_size = spec.world_size;
  in.global_batch_size = spec.global_batch_size;
  in.seq_len = spec.seq_len;
  if (HasModelConfig(spec)) in.model = spec.model;
  in.devices_per_node = spec.world_size % spec.local_world_size == 0 ? spec.local_world_size : 0;
  in.format = rank.launcher.format;
  in.file_dir = dir;
  absl::StatusOr<ExportResult> exported = Export(in);
  if (!exported.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", in.format, " export of this strategy: ", exported.status().message()));
  }
  if (exported->rejected()) {
    std::vector<std::string> why;
    for (const FidelityRow& row : exported->fidelity) {
      if (row.status == FidelityStatus::kRejected) {
        why.push_back(absl::StrCat(row.dimension, "=", row.value, ": ", row.note));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(in.format, " rejects this strategy (", absl::StrJoin(why, "; "), ")"));
  }
  for (auto& [name, content] : exported->files) {
    files.push_back({name, absl::StrCat(dir, "/", name), std::move(content)});
  }
  return files;
}

nlohmann::json StrategyFileJson(const LauncherRank& rank, const std::vector<ExportedFile>& files,
                                const std::string& dir) {
  const TrialSpec& spec = rank.spec;
  nlohmann::json j;
  j["trial_id"] = spec.trial_id;
  j["attempt"] = spec.attempt;
  j["rank"] = spec.rank;
  j["local_rank"] = spec.local_rank;
  j["world_size"] = spec.world_size;
  j["local_world_size"] = spec.local_world_size;
  j["group_rank"] = spec.group_rank;
  j["seq_len"] = spec.seq_len;
  j["global_batch_size"] = spec.global_batch_size;
  j["warmup_steps"] = spec.warmup_steps;
  j["measured_steps"] = spec.measured_steps;
  j["device_type"] = rank.device_type;
  j["trial_dir"] = dir;
  j["strategy"] = StrategyToJson(spec.strategy);
  j["strategy_text"] = StrategyToText(spec.strategy);
  j["format"] = rank.launcher.format;
  j["files"] = nlohmann::json::object();
  for (const ExportedFile& f : files) j["files"][f.name] = f.path;
  if (HasModelConfig(spec)) {
    j["model"] = {{"family", spec.model.family}, {"config", spec.model.ToConfigJson()}};
  }
  return j;
}

// The placeholders' values: the worker's and the strategy's.
std::map<std::string, std::string> PlaceholderValues(const LauncherRank& rank,
                                                     const LauncherTrialOptions& options,
                                                     const std::string& dir) {
  const TrialSpec& spec = rank.spec;
  std::map<std::string, std::string> v = {
      {"strategy_file", dir + "/strategy.json"},
      {"trial_dir", dir},
      {"metrics_file", dir + "/metrics.jsonl"},
      {"python", options.python},
      {"rank", absl::StrCat(spec.rank)},
      {"local_rank", absl::StrCat(spec.local_rank)},
      {"world_size", absl::StrCat(spec.world_size)},
      {"global_batch_size", absl::StrCat(spec.global_batch_size)},
      {"seq_len", absl::StrCat(spec.seq_len)},
      {"warmup_steps", absl::StrCat(spec.warmup_steps)},
      {"measured_steps", absl::StrCat(spec.measured_steps)}};
  const nlohmann::json strategy = StrategyToJson(spec.strategy);
  for (const auto& [key, value] : strategy.items()) {
    v[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return v;
}

// A TCP port of 127.0.0.1 that no socket holds now (the kernel's pick), or
// 0 when none can be had.
int FreeLocalPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The worker's variables for the rank (they override the launcher's env).
std::vector<std::pair<std::string, std::string>> RankEnvironment(const LauncherRank& rank,
                                                                 const std::string& dir,
                                                                 std::vector<std::string>* unset) {
  const TrialSpec& spec = rank.spec;
  std::vector<std::pair<std::string, std::string>> vars = rank.launcher.env;
  const std::vector<std::pair<std::string, std::string>> worker = {
      {"RANK", absl::StrCat(spec.rank)},
      {"LOCAL_RANK", absl::StrCat(spec.local_rank)},
      {"WORLD_SIZE", absl::StrCat(spec.world_size)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(spec.local_world_size)},
      {"GROUP_RANK", absl::StrCat(spec.group_rank)},
      {"ROLE_RANK", absl::StrCat(spec.rank)},
      {"ROLE_WORLD_SIZE", absl::StrCat(spec.world_size)},
      {"AUTOACCEL_STRATEGY_FILE", dir + "/strategy.json"},
      {"AUTOACCEL_TRIAL_DIR", dir},
      {"AUTOACCEL_METRICS_FILE", dir + "/metrics.jsonl"},
      {"AUTOACCEL_WARMUP_STEPS", absl::StrCat(spec.warmup_steps)},
      {"AUTOACCEL_MEASURED_STEPS", absl::StrCat(spec.measured_steps)},
      {"AUTOACCEL_TRIAL_ID", spec.trial_id},
      {"AUTOACCEL_DEVICE_TYPE", rank.device_type}};
  vars.insert(vars.end(), worker.begin(), worker.end());
  if (spec.world_size > 1) {
    vars.emplace_back("MASTER_ADDR", spec.master_addr);
    vars.emplace_back("MASTER_PORT", absl::StrCat(spec.master_port));
  } else if (const int port = FreeLocalPort(); port > 0) {
    // One rank meets nobody, but torchrun sets a rendezvous anyway and
    // scripts rely on it (accelerate starts a process group of one when
    // LOCAL_RANK is set): a port of this host no one holds now.
    vars.emplace_back("MASTER_ADDR", "127.0.0.1");
    vars.emplace_back("MASTER_PORT", absl::StrCat(port));
  } else {
    unset->push_back("MASTER_ADDR");
    unset->push_back("MASTER_PORT");
  }
  if (rank.device_type == "cpu") {
    vars.emplace_back("OMP_NUM_THREADS", absl::StrCat(std::max(1, spec.num_threads)));
  } else if (const AcceleratorType* type = FindAcceleratorType(rank.device_type)) {
    const std::string name(type->visible_devices);
    vars.emplace_back(name, VisibleDevicesValue(rank.device_ordinals, std::getenv(name.c_str())));
  }
  return vars;
}

// The first line of the rank's stderr that says it ran out of memory.
std::optional<std::string> OomLine(const std::string& stderr_path) {
  for (absl::string_view line : absl::StrSplit(TailOfFile(stderr_path, 200), '\n')) {
    for (absl::string_view mark : kOomMarks) {
      if (absl::StrContains(line, mark)) return std::string(line.substr(0, 500));
    }
  }
  return std::nullopt;
}

std::string StderrTail(const std::string& stderr_path) {
  const std::string tail = TailOfFile(stderr_path, kStderrLinesInReason);
  return tail.empty() ? "stderr: (empty)" : absl::StrCat("stderr:\n", tail);
}

std::string FormatBytes(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

// Makes the rank's trial directory afresh and writes into it what the
// script reads (the export's files, strategy.json, an empty metrics file);
// returns the expanded argv. INTERNAL when the directory cannot be written;
// INVALID_ARGUMENT or NOT_FOUND when this strategy cannot run with the
// launcher (its export fails or rejects it, or argv names a file it did
// not write).
absl::StatusOr<std::vector<std::string>> PrepareRank(const LauncherRank& rank,
                                                     const LauncherTrialOptions& options,
                                                     const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot make the trial directory ", dir, ": ", ec.message()));
  }
  ASSIGN_OR_RETURN(const std::vector<ExportedFile> files, ExportFiles(rank, dir));
  for (const ExportedFile& f : files) RETURN_IF_ERROR(WriteFile(f.path, f.content));
  if (absl::Status s = WriteJsonFile(dir + "/strategy.json", StrategyFileJson(rank, files, dir));
      !s.ok()) {
    return absl::InternalError(s.message());
  }
  RETURN_IF_ERROR(WriteFile(dir + "/metrics.jsonl", ""));
  return ExpandArgv(rank.launcher, PlaceholderValues(rank, options, dir), files);
}

// Why the watch over a running rank ended.
enum class Stop { kExited, kDone, kBadLine, kOomEvent, kRss, kTimeout, kCancel };

struct Watched {
  Stop stop = Stop::kExited;
  int wait_status = 0;  // the script's, however it ended
  MetricsLog log;
  absl::Status metrics_error;  // kBadLine
  int64_t peak_rss_bytes = 0;
  int64_t rss_at_stop = 0;  // kRss
};

// Polls the running rank `pid` every poll_interval until something ends
// it, stops it when it is still running (SIGTERM, SIGKILL after the
// grace) and reaps it with every process of its group.
Watched WatchRank(pid_t pid, const LauncherRank& rank, const LauncherTrialOptions& options,
                  const std::string& metrics_path) {
  const TrialSpec& spec = rank.spec;
  const int wanted = spec.warmup_steps + spec.measured_steps;
  const bool limit_rss = rank.device_type == "cpu" && spec.memory_limit_bytes > 0;
  MetricsFileReader metrics(metrics_path);
  ProcessTreeMemory memory(pid);
  Watched w;
  ChildWatch watch;
  watch.deadline = absl::Now() + options.timeout;
  watch.poll_interval = options.poll_interval;
  watch.grace = options.grace;
  watch.cancel = options.should_cancel;
  watch.stop = [&](bool exited) {
    w.metrics_error = metrics.Poll();  // after waitpid: an exited script's last lines count
    const int64_t rss = exited ? 0 : memory.Poll();
    if (!w.metrics_error.ok()) {
      w.stop = Stop::kBadLine;
    } else if (metrics.log().oom) {
      w.stop = Stop::kOomEvent;
    } else if (static_cast<int>(metrics.log().steps.size()) >= wanted) {
      w.stop = Stop::kDone;
    } else if (!exited && limit_rss && rss > spec.memory_limit_bytes) {
      w.stop = Stop::kRss;
      w.rss_at_stop = rss;
    } else {
      return false;
    }
    return true;
  };
  const ChildEnd end = WatchChild(pid, watch);
  w.wait_status = end.wait_status;
  if (end.why == ChildEnd::kExited) w.stop = Stop::kExited;
  if (end.why == ChildEnd::kTimedOut) w.stop = Stop::kTimeout;
  if (end.why == ChildEnd::kCancelled) w.stop = Stop::kCancel;
  w.log = metrics.log();
  w.peak_rss_bytes = memory.peak();
  return w;
}

// The rank's result from how its watch ended ("How a rank ends" in
// docs/LAUNCHERS.md).
TrialResult Outcome(const Watched& w, const LauncherRank& rank, const LauncherTrialOptions& options,
                    const std::string& stderr_path) {
  const TrialSpec& spec = rank.spec;
  RankMetricsInput in;
  in.warmup_steps = spec.warmup_steps;
  in.measured_steps = spec.measured_steps;
  in.world_size = spec.world_size;
  in.global_batch_size = spec.global_batch_size;
  in.seq_len = spec.seq_len;
  in.flops_per_token = HasModelConfig(spec) ? spec.model.TrainingFlopsPerToken(spec.seq_len) : 0;
  in.device_peak_tflops = spec.peak_tflops.For(spec.strategy.precision);
  in.peak_rss_bytes = w.peak_rss_bytes;
  TrialResult result;
  result.metrics = RankMetrics(w.log, in);
  for (const StepEvent& s : w.log.steps) {
    if (s.loss) result.step_losses.push_back(*s.loss);
  }
  const std::string progress =
      absl::StrCat(w.log.steps.size(), " of ", spec.warmup_steps + spec.measured_steps, " steps");
  auto end = [&](TrialStatus status, std::string why) {
    result.status = status;
    result.error = std::move(why);
    return result;
  };
  switch (w.stop) {
    case Stop::kDone:
      return end(TrialStatus::kSucceeded, "");
    case Stop::kBadLine:
      return end(TrialStatus::kFailed, std::string(w.metrics_error.message()));
    case Stop::kOomEvent:
      return end(TrialStatus::kOom,
                 w.log.oom->empty()
                     ? absl::StrCat("the script reported running out of memory after ", progress)
                     : *w.log.oom);
    case Stop::kRss:
      return end(TrialStatus::kOom,
                 absl::StrCat("the script's processes used ", FormatBytes(w.rss_at_stop),
                              " of memory, more than the device's ",
                              FormatBytes(spec.memory_limit_bytes)));
    case Stop::kTimeout:
      return end(TrialStatus::kTimeout,
                 absl::StrCat("the script did not report its steps within ",
                              absl::FormatDuration(options.timeout), ": reported ", progress, "; ",
                              StderrTail(stderr_path)));
    case Stop::kCancel:
      return end(TrialStatus::kCancelled, "cancelled");
    case Stop::kExited:
      break;
  }
  if (std::optional<std::string> oom = OomLine(stderr_path)) {
    return end(TrialStatus::kOom, *oom);
  }
  result.infrastructure = EndedFromOutside(w.wait_status);
  return end(TrialStatus::kFailed, absl::StrCat("script ", HowChildEnded(w.wait_status), " after ",
                                                progress, "; ", StderrTail(stderr_path)));
}

}  // namespace

std::string LauncherTrialDir(const LauncherRank& rank, const std::string& work_dir) {
  return absl::StrCat(work_dir, "/",
                      RankFileStem(rank.spec.trial_id, rank.spec.attempt, rank.spec.rank));
}

TrialResult RunLauncherRank(const LauncherRank& rank, const LauncherTrialOptions& options) {
  std::error_code ec;
  const std::string dir = fs::absolute(LauncherTrialDir(rank, options.work_dir), ec).string();
  absl::StatusOr<std::vector<std::string>> argv = PrepareRank(rank, options, dir);
  if (!argv.ok()) {
    // INTERNAL: the worker's disk; anything else: this strategy's export or argv.
    return Failed(std::string(argv.status().message()),
                  argv.status().code() == absl::StatusCode::kInternal);
  }
  absl::StatusOr<std::string> cache =
      PrepareLauncherCache(options.cache, rank.launcher.name, options.sandbox);
  if (!cache.ok()) return Failed(std::string(cache.status().message()), true);
  std::vector<std::string> unset;
  std::vector<std::pair<std::string, std::string>> vars = RankEnvironment(rank, dir, &unset);
  for (auto& var : LauncherCacheEnvironment(*cache, options.cache.hf_home, rank.launcher.env)) {
    vars.push_back(std::move(var));
  }
  const std::vector<std::string> env = ChildEnvironment(vars, unset, options.rank_env);
  SpawnOptions spawn;
  spawn.stdout_path = dir + "/stdout.log";
  spawn.stderr_path = dir + "/stderr.log";
  spawn.env = &env;
  spawn.workdir = rank.launcher.workdir.empty() ? dir : rank.launcher.workdir;
  const std::string shm_key = absl::StrCat(rank.spec.trial_id, "-a", rank.spec.attempt);
  if (options.sandbox != nullptr) {
    if (absl::Status given = options.sandbox->GiveToRank(dir); !given.ok()) {
      return Failed(std::string(given.message()), true);
    }
    RankMounts mounts;
    mounts.trial_dir = dir;
    mounts.workdir = rank.launcher.workdir;
    mounts.read_only = PathsTheCommandReads(*argv, options.python, rank.launcher.workdir, vars);
    mounts.shm_dir = options.sandbox->AcquireShm(shm_key);
    mounts.cache_dir = *cache;
    *argv = options.sandbox->Wrap(*argv, mounts, &spawn);
    spawn.workdir.clear();  // bwrap enters it
  }
  absl::StatusOr<pid_t> started = SpawnChild(*argv, spawn);
  if (!started.ok()) {
    if (options.sandbox != nullptr) options.sandbox->ReleaseShm(shm_key);
    return Failed(absl::StrCat("cannot start launcher '", rank.launcher.name,
                               "': ", started.status().message()),
                  true);
  }
  Watched watched = WatchRank(*started, rank, options, dir + "/metrics.jsonl");
  if (options.sandbox != nullptr) {
    options.sandbox->ReleaseShm(shm_key);
    watched.wait_status = RankWaitStatus(watched.wait_status);
  }
  return Outcome(watched, rank, options, spawn.stderr_path);
}

}  // namespace autoaccel
