// autoaccel-worker: owns this node's devices and runs trial ranks on them.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/client_channel.h"
#include "common/daemon_start.h"
#include "common/json_log.h"
#include "common/listen_policy.h"
#include "common/protobuf_log.h"
#include "common/signals.h"
#include "common/tls_files.h"
#include "common/token_files.h"
#include "proto/convert.h"
#include "worker/child_process.h"
#include "worker/device_discovery.h"
#include "worker/launcher_paths.h"
#include "worker/launchers.h"
#include "worker/model_file_cache.h"
#include "worker/rank_environment.h"
#include "worker/registrar.h"
#include "worker/sandbox_flags.h"
#include "worker/stale_dirs.h"
#include "worker/timing_jitter.h"
#include "worker/worker_flags.h"
#include "worker/worker_identity.h"
#include "worker/worker_service.h"

namespace {

// A model file no trial ran for this long is deleted at the worker's next
// start (worker/model_file_cache.h RemoveUnusedModelFiles).
constexpr absl::Duration kKeepModelFilesFor = absl::Hours(24 * 7);

}  // namespace

int main(int argc, char** argv) {
  autoaccel::BlockTerminationSignals();
  autoaccel::LogProtobufThroughSpdlog();
  CLI::App app{"autoaccel-worker: runs dry-run trials for an autoaccel coordinator"};
  std::string coordinator = "127.0.0.1:50051";
  std::string listen = "127.0.0.1:0";
  std::string devices_text = "cpu:1";
  std::string worker_id;
  std::string runner;
  std::string work_dir;
  std::string log_level = "info";
  int64_t device_memory = 0;
  int threads_per_device = 0;
  std::string peak_text;
  std::string rendezvous_ports = "29500-29999";
  std::string advertise_host;
  bool simulate_gpus = false;
  std::string launchers_path;
  std::string python = "python3";
  double launcher_grace = 5, reattach_window = 60;
  app.add_option("--coordinator", coordinator, "HOST:PORT of autoaccel-server");
  app.add_option("--listen", listen, "HOST:PORT to serve on (port 0 picks a free one)");
  app.add_option("--devices", devices_text,
                 "cpu:N (N CPU slots), cuda:0,1,... or, for launcher trials only, another "
                 "accelerator type: musa:0-7, xpu:0,1, hip:..., npu:..., mlu:...");
  app.add_option("--id", worker_id, "worker id (default: HOST:PORT it listens on)");
  app.add_option("--trial-runner", runner,
                 "autoaccel-trial executable (default: next to this one)");
  app.add_option("--work-dir", work_dir, "folder for trial specs, results and logs");
  app.add_option("--device-memory", device_memory,
                 "bytes of memory per device (default: cpu: physical memory / N)");
  app.add_option("--threads-per-device", threads_per_device,
                 "CPU threads per trial rank (default: cores / devices)");
  CLI::Option* peak_option = app.add_option(
      "--peak-tflops", peak_text,
      "each device's dense peak, fp32=X,bf16=Y,fp16=Z,fp8=W TFLOP/s, for MFU (default: "
      "cpu: measured at start; cuda: the GPU model's datasheet figure)");
  app.add_option("--rendezvous-ports", rendezvous_ports,
                 "A-B: ports of this host on which rank 0 of a multi-rank trial may serve its "
                 "rendezvous store; the coordinator gives each running trial its own");
  app.add_option("--advertise-host", advertise_host,
                 "host name or IP the coordinator and other workers reach this worker at "
                 "(default: the --listen host; this machine's host name when that is 0.0.0.0 "
                 "or ::)");
  app.add_flag("--simulate-gpus", simulate_gpus,
               "testing only: register cuda devices that nvidia-smi does not list (their trials "
               "fail); without it such a worker refuses to start");
  app.add_option("--launchers", launchers_path,
                 "JSON file of launchers: users' training scripts that trials may run "
                 "(docs/LAUNCHERS.md)");
  app.add_option("--python", python,
                 "the Python a launcher's {python} names (default: python3 in PATH)");
  app.add_option("--reattach-window", reattach_window,
                 "seconds a trial rank keeps running, and its answer is kept, after its "
                 "coordinator went away (died or restarted), for the coordinator to take it up "
                 "again when this worker registers with it; 0 stops such ranks at once")
      ->check(CLI::NonNegativeNumber);
  std::string keep_trial_dirs = "200";
  app.add_option("--keep-trial-dirs", keep_trial_dirs,
                 "how many finished ranks' directories (logs, specs) to keep in the work dir: a "
                 "count (200), an age (6h, 2d) or all; a failed rank's are kept 4x as long");
  std::string launcher_cache;
  bool launcher_cache_hf = false;
  app.add_option("--launcher-cache", launcher_cache,
                 "directory of each launcher's persistent cache, shared by its trials and kept "
                 "between jobs (torch extensions, Triton, torch.compile, CUDA JIT, pip); "
                 "default WORK_DIR/launcher-cache; off: none");
  app.add_flag("--launcher-cache-hf", launcher_cache_hf,
               "keep Hugging Face's hub (HF_HOME) in the launcher's cache too");
  app.add_option("--launcher-grace", launcher_grace,
                 "seconds between SIGTERM and SIGKILL when a launcher rank is stopped")
      ->check(CLI::Range(0.0, 600.0));
  autoaccel::SandboxFlags sandbox_flags;
  autoaccel::AddSandboxFlags(&app, &sandbox_flags);
  std::vector<std::string> rank_env;
  app.add_option("--rank-env", rank_env,
                 "a variable of this worker's environment that trial ranks inherit (repeatable; "
                 "NAME, or PREFIX* for all that start so), replacing the default list of what "
                 "training needs (PATH, locale, CUDA_*, NCCL_*, GLOO_*, TORCH_*, OMP_*, HF_*, ...; "
                 "docs/SECURITY.md); a name holding TOKEN, SECRET, PASSWORD, CREDENTIAL or KEY "
                 "passes only when named exactly");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "text, or json: one JSON object per line with trial_id and rank where the line "
                 "is about one")
      ->check(CLI::IsMember({"text", "json"}));
  std::string join_token_file;
  autoaccel::TlsFiles tls;
  bool insecure = false;
  app.add_option("--join-token-file", join_token_file,
                 "file whose first line is the coordinator's join token (server "
                 "--join-token-file)");
  app.add_option("--tls-cert", tls.cert, "PEM certificate chain to serve the trial service with");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", tls.ca,
                 "PEM CA certificates to trust: connect to the coordinator "
                 "over TLS");
  app.add_flag("--insecure", insecure,
               "run on a network address without TLS or a join token (every log line says so)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::vector<std::string> missing = autoaccel::MissingProtections(
      tls, /*has_user_tokens=*/std::nullopt, !join_token_file.empty());
  if (tls.ca.empty() && !autoaccel::IsLoopbackListen(coordinator)) {
    missing.push_back("TLS to the coordinator (--tls-ca)");
  }
  autoaccel::DaemonStart start;
  start.daemon = "autoaccel-worker";
  start.log_level = log_level;
  start.log_format = log_format;
  start.insecure = insecure;
  // What others reach: its own port, or (listening on loopback) the coordinator's.
  start.ports = {{autoaccel::IsLoopbackListen(listen) ? coordinator : listen, missing, ""}};
  absl::StatusOr<std::string> unprotected = autoaccel::StartDaemon(start);
  if (!unprotected.ok()) {
    std::fprintf(stderr, "autoaccel-worker: %s\n",
                 std::string(unprotected.status().message()).c_str());
    return 2;
  }
  const std::string insecure_why = *unprotected;
  std::string join_token;
  if (!join_token_file.empty()) {
    auto read = autoaccel::ReadTokenFile(join_token_file, "--join-token-file");
    if (!read.ok()) {
      std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(read.status().message()).c_str());
      return 2;
    }
    join_token = *std::move(read);
  }
  auto serve_credentials = autoaccel::ServerCredentialsFor(tls);
  auto coordinator_credentials =
      autoaccel::ChannelCredentialsFor(autoaccel::TlsFiles{"", "", tls.ca});
  for (const absl::Status& s : {serve_credentials.status(), coordinator_credentials.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }

  auto devices = autoaccel::ParseDevices(devices_text, device_memory);
  if (!devices.ok()) {
    std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(devices.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::pair<int, int>> ports = autoaccel::ParseRendezvousPorts(rendezvous_ports);
  if (!ports.ok()) {
    std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(ports.status().message()).c_str());
    return 2;
  }
  std::optional<autoaccel::PeakTflops> peak;
  if (peak_option->count() > 0) {
    absl::StatusOr<autoaccel::PeakTflops> parsed = autoaccel::ParsePeakTflops(peak_text);
    if (!parsed.ok()) {
      std::fprintf(stderr, "autoaccel-worker: %s\n",
                   std::string(parsed.status().message()).c_str());
      return 2;
    }
    peak = *parsed;
  }
  autoaccel::Launchers launchers;
  if (!launchers_path.empty()) {
    absl::StatusOr<autoaccel::Launchers> read = autoaccel::ReadLaunchersFile(launchers_path);
    if (!read.ok()) {
      std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(read.status().message()).c_str());
      return 2;
    }
    launchers = std::move(*read);
    absl::StatusOr<std::string> found = autoaccel::FindExecutable(python);
    if (!found.ok() || ::access(found->c_str(), X_OK) != 0) {
      std::fprintf(stderr, "autoaccel-worker: --python %s: not an executable (nor in PATH)\n",
                   python.c_str());
      return 2;
    }
    // Absolute: a rank starts in its launcher's workdir, not the worker's.
    std::error_code absolute_ec;
    python = std::filesystem::absolute(*found, absolute_ec).string();
  }
  namespace fs = std::filesystem;
  if (runner.empty()) {
    runner = (fs::read_symlink("/proc/self/exe").parent_path() / "autoaccel-trial").string();
  }
  if (::access(runner.c_str(), X_OK) != 0) {
    if (launchers.empty()) {
      std::fprintf(stderr, "autoaccel-worker: trial runner %s is not executable\n", runner.c_str());
      return 2;
    }
    spdlog::warn(
        "trial runner {} is not executable: only launcher trials can run on this worker (the cpu "
        "peak is unknown unless --peak-tflops gives it)",
        runner);
    runner.clear();
  }
  for (const autoaccel::v1::Device& d : *devices) {
    if (d.type() != "cpu" && d.type() != "cuda" && launchers.empty()) {
      std::fprintf(stderr,
                   "autoaccel-worker: --devices %s: only launcher trials run on %s devices; give "
                   "--launchers\n",
                   devices_text.c_str(), d.type().c_str());
      return 2;
    }
  }
  if (work_dir.empty()) {
    work_dir = (fs::temp_directory_path() / absl::StrCat("autoaccel-worker-", ::getpid())).string();
  }
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) {
    std::fprintf(stderr, "autoaccel-worker: cannot create %s: %s\n", work_dir.c_str(),
                 ec.message().c_str());
    return 2;
  }
  if (const int removed = autoaccel::RemoveUnusedModelFiles(work_dir, kKeepModelFilesFor);
      removed > 0) {
    spdlog::info("removed {} model file(s) unused for {} from {}/models", removed,
                 absl::FormatDuration(kKeepModelFilesFor), work_dir);
  }
  if (const autoaccel::SweptDirs swept = autoaccel::SweepDeadWorkersDirs(work_dir);
      swept.sandbox + swept.shm > 0) {
    spdlog::info(
        "removed what dead workers left in {}: {} sandbox and {} shared-memory directories",
        work_dir, swept.sandbox, swept.shm);
  }
  absl::StatusOr<std::shared_ptr<const autoaccel::Sandbox>> sandbox =
      autoaccel::SandboxFromFlags(sandbox_flags, work_dir, runner, launchers.empty() ? "" : python);
  if (!sandbox.ok()) {
    std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(sandbox.status().message()).c_str());
    return 2;
  }
  if (*sandbox != nullptr && !launchers.empty()) {
    if (absl::Status readable = autoaccel::CheckLaunchersReadable(**sandbox, launchers);
        !readable.ok()) {
      std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(readable.message()).c_str());
      return 2;
    }
  }
  if (threads_per_device <= 0) {
    threads_per_device = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                         static_cast<int>(devices->size()));
  }

  autoaccel::DeviceProbeOptions probe;
  probe.runner_path = runner;
  probe.threads_per_device = threads_per_device;
  probe.work_dir = work_dir;
  probe.peak = peak;
  probe.keep_memory = device_memory > 0;

  autoaccel::WorkerOptions options;
  options.runner_path = runner;
  options.work_dir = work_dir;
  std::vector<std::string> unidentified;
  autoaccel::DescribeDevices(probe, &*devices, &unidentified);
  if (!unidentified.empty() && !simulate_gpus) {
    std::fprintf(stderr,
                 "autoaccel-worker: --devices names %s, which nvidia-smi does not list on this "
                 "machine: every trial there would fail. Give the GPUs this machine has, or "
                 "cpu:N (--simulate-gpus registers them anyway, for tests)\n",
                 absl::StrJoin(unidentified, ", ").c_str());
    return 2;
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (devices->front().type() == "cpu" && cores > 0 && devices->size() > cores) {
    spdlog::warn(
        "{} cpu device slots on a machine with {} cores: trials on the slots share cores and "
        "slow each other down, so their measurements are noisy and their ranking unreliable "
        "(give at most cpu:{})",
        devices->size(), cores, cores);
  }
  options.devices = *devices;
  options.threads_per_device = threads_per_device;
  options.cpu_peaks_measured = !peak.has_value() && !runner.empty();
  options.launchers = launchers;
  options.python = python;
  options.launcher_grace = absl::Seconds(launcher_grace);
  absl::StatusOr<autoaccel::TrialDirLimit> keep = autoaccel::ParseTrialDirLimit(keep_trial_dirs);
  if (!keep.ok()) {
    std::fprintf(stderr, "autoaccel-worker: %s\n", std::string(keep.status().message()).c_str());
    return 2;
  }
  if (!keep->keeps_all()) {
    options.trial_dirs = std::make_shared<autoaccel::TrialDirJanitor>(work_dir, *keep);
    options.trial_dirs->AdoptExisting();
  }
  if (launcher_cache != "off") {
    options.launcher_cache.root =
        fs::absolute(launcher_cache.empty() ? work_dir + "/launcher-cache" : launcher_cache, ec)
            .string();
    options.launcher_cache.hf_home = launcher_cache_hf;
  }
  options.reattach_window = absl::Seconds(reattach_window);
  options.sandbox = *sandbox;
  options.rank_env = autoaccel::RankEnvAllowlist(rank_env);
  // Set once the registrar exists; a raised peak reaches the coordinator.
  std::atomic<autoaccel::Registrar*> registrar_ref{nullptr};
  options.on_devices_changed = [&registrar_ref](const std::vector<autoaccel::v1::Device>& d) {
    if (autoaccel::Registrar* r = registrar_ref.load()) r->UpdateDevices(d);
  };
  autoaccel::WorkerServiceImpl service(options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, *serve_credentials, &port);
  builder.SetMaxReceiveMessageSize(autoaccel::kMaxMessageBytes);  // torchscript files
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "autoaccel-worker: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  char hostname[256] = {};
  ::gethostname(hostname, sizeof(hostname) - 1);
  const std::string address = autoaccel::AdvertisedAddress(listen, port, advertise_host, hostname);
  if (worker_id.empty()) worker_id = address;
  autoaccel::Announce(absl::StrFormat(
      "autoaccel-worker %s listening on %s with %d %s device(s)%s%s", worker_id, address,
      devices->size(), devices->front().type(), tls.serves_tls() ? ", TLS" : "",
      insecure_why.empty() ? "" : " INSECURE: " + insecure_why));
  if (!launchers.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, def] : launchers) names.push_back(name);
    autoaccel::Announce("launchers: " + absl::StrJoin(names, ", "));
  }
  // Gangs span hosts only when the coordinator is on another one.
  if (!autoaccel::IsLoopbackListen(coordinator)) {
    if (const std::string problem = autoaccel::AdvertisedAddressProblem(address);
        !problem.empty()) {
      spdlog::warn(
          "this worker registers as {}: {}; give --advertise-host the address of this machine "
          "that the other workers reach (deploy/MULTI_HOST.md)",
          address, problem);
    }
  }

  autoaccel::v1::RegisterRequest registration;
  registration.set_worker_id(worker_id);
  absl::StatusOr<std::string> identity =
      autoaccel::LoadOrCreateIdentityKey(autoaccel::IdentityKeyPath(work_dir, worker_id));
  if (!identity.ok()) {
    std::fprintf(stderr, "autoaccel-worker: %s\n",
                 std::string(identity.status().message()).c_str());
    return 2;
  }
  registration.set_identity_key(*identity);
  registration.set_address(address);
  for (const auto& d : *devices) *registration.add_devices() = d;
  registration.set_host_cpu_cores(static_cast<int>(std::thread::hardware_concurrency()));
  registration.set_host_memory_bytes(static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                                     sysconf(_SC_PAGESIZE));
  registration.set_rendezvous_port_min(ports->first);
  registration.set_rendezvous_port_max(ports->second);
  for (const auto& [name, def] : launchers) {
    *registration.add_launchers() = autoaccel::LauncherToProto(def);
  }
  registration.set_timing_jitter(autoaccel::MeasureTimingJitter());
  autoaccel::Announce(absl::StrFormat(
      "timing jitter: runs of one small CPU kernel vary by %.1f%% ((p90 - p10) / median)",
      100 * registration.timing_jitter()));
  registration.set_tls(tls.serves_tls());
  registration.set_insecure(insecure_why);
  autoaccel::Registrar registrar(
      autoaccel::CreateClientChannel(coordinator, *coordinator_credentials, join_token),
      registration, service.gate(), [&service] { return service.RunningRanks(); });
  registrar.Start();
  registrar_ref = &registrar;

  int sig = autoaccel::WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", sig);
  registrar_ref = nullptr;
  registrar.Stop();
  service.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  // Its ranks are stopped: nothing of it stays in the work dir or /dev/shm.
  autoaccel::RemoveWorkerDirs(::getpid(), fs::absolute(work_dir, ec).string());
  return 0;
}
