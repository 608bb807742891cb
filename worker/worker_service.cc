#include "worker/worker_service.h"

#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/content_digest.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "proto/convert.h"
#include "search/device_peak.h"
#include "search/model_spec.h"

namespace autoaccel {
namespace {

// One file name part per rank: "job-...-t0003-a1-r0".
std::string RankName(const std::string& trial_id, int attempt, int rank) {
  return absl::StrCat(trial_id, "-a", attempt, "-r", rank);
}

// "exited with code N" / "was killed by signal N" for a wait status.
std::string HowItEnded(int status) {
  return WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status))
                             : absl::StrCat("exited with code ", WEXITSTATUS(status));
}

bool Succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string PeakText(const PeakTflops& p) {
  return absl::StrCat("fp32 ", p.fp32, ", bf16 ", p.bf16, ", fp16 ", p.fp16, " TFLOP/s");
}

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;  // 0 when nvidia-smi does not say
};

// Lines "INDEX, NAME, MEMORY_MIB" (csv,noheader,nounits).
absl::StatusOr<std::vector<GpuInfo>> ParseNvidiaSmi(const std::string& csv) {
  std::vector<GpuInfo> gpus;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    for (absl::string_view& f : fields) f = absl::StripAsciiWhitespace(f);
    GpuInfo gpu;
    if (fields.size() < 3 || !absl::SimpleAtoi(fields[0], &gpu.index)) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected line '", line, "'"));
    }
    gpu.name = absl::StrJoin(fields.begin() + 1, fields.end() - 1, ",");
    int64_t mib = 0;
    if (absl::SimpleAtoi(fields.back(), &mib) && mib > 0) gpu.memory_bytes = mib << 20;
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

// nvidia-smi's index of CUDA ordinal `ordinal`: the same unless
// CUDA_VISIBLE_DEVICES renumbers. nullopt when it names devices some other
// way (UUIDs, MIG instances) or has no such entry.
std::optional<int> NvidiaSmiIndex(int ordinal) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return ordinal;
  std::vector<absl::string_view> entries = absl::StrSplit(visible, ',');
  int index = 0;
  if (ordinal >= static_cast<int>(entries.size()) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(entries[ordinal]), &index)) {
    return std::nullopt;
  }
  return index;
}

void DescribeGpus(const DeviceProbeOptions& options, const std::vector<std::string>& runner_devices,
                  std::vector<v1::Device>* devices, std::vector<std::string>* unidentified) {
  const std::string out = options.work_dir + "/nvidia-smi.out";
  const std::string log = options.work_dir + "/nvidia-smi.log";
  absl::StatusOr<int> status = RunChildProcess(
      {options.nvidia_smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"},
      out, log, options.timeout);
  absl::StatusOr<std::vector<GpuInfo>> gpus =
      !status.ok() ? status.status()
      : Succeeded(*status)
          ? ParseNvidiaSmi(TailOfFile(out, 1024))
          : absl::UnavailableError(absl::StrCat(options.nvidia_smi, " ", HowItEnded(*status), ": ",
                                                TailOfFile(log, 3)));
  if (!gpus.ok()) {
    spdlog::warn(
        "cannot query the GPUs ({}): cuda devices keep their names and memory, and "
        "their peak TFLOP/s is unknown (MFU 0) unless --peak-tflops gives it",
        std::string(gpus.status().message()));
    for (size_t i = 0; i < devices->size(); ++i) {
      if ((*devices)[i].type() == "cuda") unidentified->push_back(runner_devices[i]);
    }
    return;
  }
  for (size_t i = 0; i < devices->size(); ++i) {
    v1::Device& d = (*devices)[i];
    if (d.type() != "cuda") continue;
    int ordinal = -1;
    absl::SimpleAtoi(absl::StripPrefix(runner_devices[i], "cuda:"), &ordinal);
    std::optional<int> index = NvidiaSmiIndex(ordinal);
    const GpuInfo* gpu = nullptr;
    for (const GpuInfo& g : *gpus) {
      if (index && g.index == *index) gpu = &g;
    }
    if (gpu == nullptr) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      spdlog::warn(
          "{}: not among the GPUs nvidia-smi lists (CUDA_VISIBLE_DEVICES {}); its "
          "name, memory and peak stay unknown",
          runner_devices[i], visible ? absl::StrCat("'", visible, "'") : "unset");
      unidentified->push_back(runner_devices[i]);
      continue;
    }
    d.set_name(gpu->name);
    if (!options.keep_memory && gpu->memory_bytes > 0) d.set_memory_bytes(gpu->memory_bytes);
    spdlog::info("{}: {}, {} MiB", runner_devices[i], gpu->name, d.memory_bytes() >> 20);
    if (options.peak) continue;
    const PeakTflops peak = PeakTflopsForGpuName(gpu->name);
    *d.mutable_peak_tflops() = ToProto(peak);
    if (peak == PeakTflops{}) {
      spdlog::warn("{}: no peak TFLOP/s known for '{}' (MFU reads 0); --peak-tflops sets it",
                   runner_devices[i], gpu->name);
    } else {
      spdlog::info("{}: datasheet peak {}", runner_devices[i], PeakText(peak));
    }
  }
}

absl::StatusOr<PeakTflops> ProbeCpuPeakOnce(const DeviceProbeOptions& options) {
  const std::string out = options.work_dir + "/peak-probe.out";
  const std::string log = options.work_dir + "/peak-probe.log";
  ASSIGN_OR_RETURN(const int status,
                   RunChildProcess({options.runner_path, "--probe-peak", "--threads",
                                    absl::StrCat(options.threads_per_device)},
                                   out, log, options.timeout));
  if (!Succeeded(status)) {
    return absl::UnavailableError(absl::StrCat(options.runner_path, " --probe-peak ",
                                               HowItEnded(status), ": ", TailOfFile(log, 3)));
  }
  const std::string line = TailOfFile(out, 1);
  absl::StatusOr<nlohmann::json> j = ParseUntrustedJson(line, "--probe-peak output");
  if (!j.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.runner_path, " --probe-peak printed '", line, "', not JSON"));
  }
  ASSIGN_OR_RETURN(PeakTflops peak, PeakTflopsFromJson(*j));
  if (peak == PeakTflops{}) return absl::UnavailableError("the probe measured nothing");
  return peak;
}

// The best of several probes a moment apart: a peak must never be
// under-measured (other workers starting on the same host probe at the same
// time), or trials would read above 100% MFU.
absl::StatusOr<PeakTflops> ProbeCpuPeak(const DeviceProbeOptions& options) {
  absl::StatusOr<PeakTflops> best;
  for (int i = 0; i < std::max(1, options.probe_repeats); ++i) {
    if (i > 0) absl::SleepFor(absl::Milliseconds(250));
    absl::StatusOr<PeakTflops> peak = ProbeCpuPeakOnce(options);
    if (!peak.ok()) {
      if (!best.ok()) best = peak.status();
      continue;
    }
    if (!best.ok()) {
      best = *peak;
    } else {
      best->fp32 = std::max(best->fp32, peak->fp32);
      best->bf16 = std::max(best->bf16, peak->bf16);
      best->fp16 = std::max(best->fp16, peak->fp16);
    }
  }
  return best;
}

// Stores a torchscript model file under work_dir/models/, named by its
// digest (so trials of one job share it), and returns its path. The bytes must
// match the digest the coordinator computed. Written to a temporary name and
// renamed, so concurrent trials never read half a file.
absl::StatusOr<std::string> StoreModelFile(const std::string& work_dir, const std::string& digest,
                                           const std::string& bytes, const std::string& writer) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError("model_file: a torchscript trial came without its file");
  }
  // The digest names the file: "algorithm:hex" and nothing else.
  const size_t colon = digest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == digest.size() ||
      !CheckFileNamePart("script_digest", digest.substr(0, colon)).ok() ||
      !std::all_of(digest.begin() + colon + 1, digest.end(), ::isxdigit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("script_digest: expected ALGORITHM:HEX, got '", digest, "'"));
  }
  const std::string dir = work_dir + "/models";
  std::string name = digest;
  std::replace(name.begin(), name.end(), ':', '-');
  const std::string path = absl::StrCat(dir, "/", name, ".pt");
  // Only verified files get this name: a job's later trials reuse it without
  // hashing the bytes again (up to 512 MiB, on the RPC thread).
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      std::filesystem::file_size(path, ec) == static_cast<uintmax_t>(bytes.size())) {
    return path;
  }
  if (const std::string actual = ContentDigest(bytes); actual != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_file: content digest ", actual, " does not match ", digest));
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::string unique = writer;  // one file name part per writer
  std::replace(unique.begin(), unique.end(), '/', '-');
  const std::string tmp = absl::StrCat(path, ".", unique, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return path;
}

}  // namespace

absl::Status CheckFileNamePart(absl::string_view field, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": missing"));
  if (value.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": longer than 128 characters"));
  }
  const bool safe = std::all_of(value.begin(), value.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!safe || value.front() == '.') {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": only letters, digits, '-', '_' and '.' (not first) are allowed, got '",
        absl::CHexEscape(value), "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int, int>> ParseRendezvousPorts(const std::string& text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rendezvous-ports: ", why, "; expected A-B with 1 <= A <= B <= 65535, got '", text, "'"));
  };
  std::pair<absl::string_view, absl::string_view> ab =
      absl::StrSplit(text, absl::MaxSplits('-', 1));
  int a = 0, b = 0;
  if (text.find('-') == std::string::npos ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(ab.first), &a) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(ab.second), &b)) {
    return bad("not two port numbers");
  }
  if (a < 1 || b > 65535) return bad("a port out of range");
  if (a > b) return bad("the range is empty");
  return std::make_pair(a, b);
}

absl::StatusOr<PeakTflops> ParsePeakTflops(const std::string& text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--peak-tflops: ", why,
        "; expected fp32=X,bf16=Y,fp16=Z (TFLOP/s, any of the three), got '", text, "'"));
  };
  if (absl::StripAsciiWhitespace(text).empty()) return bad("empty");
  PeakTflops peak;
  bool seen[3] = {false, false, false};
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const int which = key == "fp32" ? 0 : key == "bf16" ? 1 : key == "fp16" ? 2 : -1;
    if (which < 0) return bad(absl::StrCat("unknown precision '", key, "'"));
    if (seen[which]) return bad(absl::StrCat(key, " given twice"));
    seen[which] = true;
    double value = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &value) || !std::isfinite(value) ||
        value < 0) {
      return bad(absl::StrCat(key, ": expected a non-negative number"));
    }
    (which == 0 ? peak.fp32 : which == 1 ? peak.bf16 : peak.fp16) = value;
  }
  return peak;
}

std::vector<std::string> DescribeDevices(const DeviceProbeOptions& options,
                                         std::vector<v1::Device>* devices,
                                         std::vector<std::string>* unidentified) {
  std::vector<std::string> ignored;
  if (unidentified == nullptr) unidentified = &ignored;
  std::vector<std::string> runner_devices;
  bool any_cpu = false, any_cuda = false;
  for (const v1::Device& d : *devices) {
    runner_devices.push_back(d.type() == "cpu" ? "cpu" : d.name());
    (d.type() == "cpu" ? any_cpu : any_cuda) = true;
  }
  if (any_cuda) DescribeGpus(options, runner_devices, devices, unidentified);
  if (options.peak) {
    for (v1::Device& d : *devices) *d.mutable_peak_tflops() = ToProto(*options.peak);
    spdlog::info("peak of every device (--peak-tflops): {}", PeakText(*options.peak));
  } else if (any_cpu) {
    absl::StatusOr<PeakTflops> peak = ProbeCpuPeak(options);
    if (!peak.ok()) {
      spdlog::warn(
          "cannot measure the CPU's peak TFLOP/s ({}): MFU of cpu trials reads 0; "
          "--peak-tflops sets it",
          std::string(peak.status().message()));
    } else {
      for (v1::Device& d : *devices) {
        if (d.type() == "cpu") *d.mutable_peak_tflops() = ToProto(*peak);
      }
      spdlog::info("cpu peak, measured with {} thread(s): {}", options.threads_per_device,
                   PeakText(*peak));
    }
  }
  return runner_devices;
}

std::string AdvertisedAddress(const std::string& listen, int port,
                              const std::string& advertise_host, const std::string& hostname) {
  std::string host = advertise_host;
  if (host.empty()) {
    const size_t colon = listen.rfind(':');
    host = colon == std::string::npos ? std::string() : listen.substr(0, colon);
    if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") host = hostname;
  }
  if (host.find(':') != std::string::npos && host.front() != '[')
    host = absl::StrCat("[", host, "]");
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text,
                                                     int64_t memory_bytes) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--devices: expected cpu:N (N CPU slots) or cuda:0,1,... — got '", text, "'"));
  };
  std::pair<std::string, std::string> kv = absl::StrSplit(text, absl::MaxSplits(':', 1));
  std::vector<v1::Device> devices;
  if (kv.first == "cpu") {
    int n = 0;
    if (!absl::SimpleAtoi(kv.second, &n) || n <= 0 || n > 1024) return bad();
    int64_t per_slot = memory_bytes;
    if (per_slot <= 0) {
      per_slot = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / n;
    }
    for (int i = 0; i < n; ++i) {
      v1::Device d;
      d.set_type("cpu");
      d.set_index(i);
      d.set_memory_bytes(per_slot);
      d.set_name("cpu");
      devices.push_back(d);
    }
  } else if (kv.first == "cuda") {
    for (absl::string_view part : absl::StrSplit(kv.second, ',')) {
      int index = 0;
      if (!absl::SimpleAtoi(part, &index) || index < 0) return bad();
      v1::Device d;
      d.set_type("cuda");
      d.set_index(static_cast<int>(devices.size()));
      d.set_memory_bytes(memory_bytes);
      d.set_name(absl::StrCat("cuda:", index));
      devices.push_back(d);
    }
  } else {
    return bad();
  }
  if (devices.empty()) return bad();
  return devices;
}

WorkerServiceImpl::~WorkerServiceImpl() { Shutdown(); }

void WorkerServiceImpl::Shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  shutting_down_ = true;
  for (auto& [key, execution] : running_) execution->cancel = true;
  idle_cv_.wait(lock, [this] { return threads_ == 0; });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RunTrial(grpc::CallbackServerContext* ctx,
                                                      const v1::RunTrialRequest* request,
                                                      v1::RunTrialResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto fail = [&](absl::Status s) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  };
  const int index = request->device_index();
  if (index < 0 || index >= static_cast<int>(options_.devices.size())) {
    return fail(absl::InvalidArgumentError(absl::StrCat("device_index: ", index,
                                                        " out of range (this worker has ",
                                                        options_.devices.size(), " devices)")));
  }
  // The trial id names files in the work dir: only safe characters.
  if (absl::Status s = CheckFileNamePart("trial_id", request->trial_id()); !s.ok()) return fail(s);
  if (request->attempt() < 1 || request->attempt() > 1000) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("attempt: must be between 1 and 1000, got ", request->attempt())));
  }
  absl::StatusOr<nlohmann::json> j = ParseUntrustedJson(request->spec_json(), "spec_json");
  if (!j.ok()) return fail(j.status());
  absl::StatusOr<TrialSpec> spec = TrialSpecFromJson(*j);
  if (!spec.ok()) return fail(spec.status());
  spec->trial_id = request->trial_id();
  spec->attempt = request->attempt();
  v1::Device device;
  {
    std::lock_guard<std::mutex> lock(mu_);
    device = devices_[index];
  }
  if (index < static_cast<int>(options_.runner_devices.size())) {
    spec->device = options_.runner_devices[index];
  } else {
    spec->device = device.type() == "cpu" ? "cpu" : device.name();
  }
  spec->num_threads = options_.threads_per_device;
  if (spec->memory_limit_bytes <= 0) spec->memory_limit_bytes = device.memory_bytes();
  if (spec->peak_tflops == PeakTflops{}) spec->peak_tflops = FromProto(device.peak_tflops());
  if (spec->model.IsTorchScript()) {
    absl::StatusOr<std::string> path =
        StoreModelFile(options_.work_dir, spec->model.script_digest, request->model_file(),
                       RankName(request->trial_id(), request->attempt(), spec->rank));
    if (!path.ok()) return fail(path.status());
    spec->model_file = *path;
  }
  absl::Duration timeout = request->timeout_seconds() > 0
                               ? absl::Seconds(request->timeout_seconds())
                               : absl::Minutes(10);

  if (spec->rank < 0 || spec->world_size < 1 || spec->rank >= spec->world_size) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "spec_json: rank ", spec->rank, " of world_size ", spec->world_size, " is out of range")));
  }
  const ExecutionKey key{request->trial_id(), request->attempt(), spec->rank};
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return fail(absl::UnavailableError("worker is shutting down"));
  auto it = running_.find(key);
  if (it != running_.end()) {  // a retried call for this rank: attach to its child
    it->second->waiters.push_back({ctx, reactor, response});
    return reactor;
  }
  auto execution = std::make_shared<Execution>();
  execution->waiters.push_back({ctx, reactor, response});
  running_[key] = execution;
  ++threads_;
  spdlog::info("trial {} rank {}: starting on {} ({})", spec->trial_id, spec->rank, spec->device,
               StrategyToText(spec->strategy));
  std::thread(&WorkerServiceImpl::RunExecution, this, key, index, *spec, timeout).detach();
  return reactor;
}

void WorkerServiceImpl::RunExecution(ExecutionKey key, int device_index, TrialSpec spec,
                                     absl::Duration timeout) {
  std::shared_ptr<Execution> execution;
  {
    std::lock_guard<std::mutex> lock(mu_);
    execution = running_[key];
  }
  TrialProcessOptions options;
  options.runner_path = options_.runner_path;
  options.work_dir = options_.work_dir;
  options.timeout = timeout;
  options.should_cancel = [this, execution] {
    if (execution->cancel) return true;
    // Stop when every caller is gone: nobody would read the result.
    std::lock_guard<std::mutex> lock(mu_);
    for (const Waiter& w : execution->waiters) {
      if (!w.ctx->IsCancelled()) return false;
    }
    return true;
  };
  TrialResult result = RunTrialProcess(spec, options);
  RaisePeakIfBeaten(device_index, spec, &result);
  spdlog::info("trial {} rank {}: {} {}", spec.trial_id, spec.rank,
               std::string(TrialStatusName(result.status)), result.error);

  std::lock_guard<std::mutex> lock(mu_);
  for (const Waiter& w : execution->waiters) {
    w.response->set_status(std::string(TrialStatusName(result.status)));
    w.response->set_reason(result.error);
    w.response->set_infrastructure(result.infrastructure);
    *w.response->mutable_metrics() = ToProto(result.metrics);
    w.reactor->Finish(grpc::Status::OK);
  }
  running_.erase(key);
  if (--threads_ == 0) idle_cv_.notify_all();
}

void WorkerServiceImpl::RaisePeakIfBeaten(int device_index, const TrialSpec& spec,
                                          TrialResult* result) {
  TrialMetrics& m = result->metrics;
  if (!options_.cpu_peaks_measured || result->status != TrialStatus::kSucceeded || !(m.mfu > 1.0) ||
      !(m.peak_tflops > 0) || spec.world_size < 1) {
    return;
  }
  const double achieved_per_device = m.achieved_tflops / spec.world_size;
  std::vector<v1::Device> devices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (devices_[device_index].type() != "cpu") return;
    for (v1::Device& d : devices_) {
      if (d.type() != "cpu") continue;
      PeakTflops peak = FromProto(d.peak_tflops());
      double& at = spec.strategy.precision == Precision::kFp16   ? peak.fp16
                   : spec.strategy.precision == Precision::kFp32 ? peak.fp32
                                                                 : peak.bf16;
      at = std::max(at, achieved_per_device);
      *d.mutable_peak_tflops() = ToProto(peak);
    }
    devices = devices_;
  }
  spdlog::warn(
      "trial {} rank {} computed {:.4g} TFLOP/s per device, above the probed peak ({:.4g}): the "
      "probe under-measured it; the cpu devices' {} peak is now {:.4g} TFLOP/s",
      spec.trial_id, spec.rank, achieved_per_device, m.peak_tflops / spec.world_size,
      std::string(PrecisionName(spec.strategy.precision)), achieved_per_device);
  m.peak_tflops = achieved_per_device * spec.world_size;
  m.mfu = m.achieved_tflops / m.peak_tflops;
  if (options_.on_devices_changed) options_.on_devices_changed(devices);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::CancelTrial(grpc::CallbackServerContext* ctx,
                                                         const v1::CancelTrialRequest* request,
                                                         v1::CancelTrialResponse*) {
  {
    // Every rank of the trial's attempt on this worker.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = running_.lower_bound(ExecutionKey{request->trial_id(), request->attempt(),
                                                     std::numeric_limits<int>::min()});
         it != running_.end() && std::get<0>(it->first) == request->trial_id() &&
         std::get<1>(it->first) == request->attempt();
         ++it) {
      spdlog::info("trial {} rank {}: cancel requested", request->trial_id(),
                   std::get<2>(it->first));
      it->second->cancel = true;
    }
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace autoaccel
