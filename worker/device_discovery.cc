#include "worker/device_discovery.h"

#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "proto/convert.h"
#include "worker/accelerators.h"
#include "worker/device_peak.h"
#include "worker/trial_process.h"

namespace autoaccel {
namespace {

// "exited with code N" / "was killed by signal N" for a wait status.
std::string HowItEnded(int status) {
  return WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status))
                             : absl::StrCat("exited with code ", WEXITSTATUS(status));
}

bool Succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string PeakText(const PeakTflops& p) {
  std::ostringstream text;
  text << p;
  return text.str();
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

void DescribeGpus(const DeviceProbeOptions& options, std::vector<v1::Device>* devices,
                  std::vector<std::string>* unidentified) {
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
    for (const v1::Device& d : *devices) {
      if (d.type() == "cuda") unidentified->push_back(RunnerDevice(d));
    }
    return;
  }
  for (v1::Device& d : *devices) {
    if (d.type() != "cuda") continue;
    const std::string runner_device = RunnerDevice(d);
    std::optional<int> index = NvidiaSmiIndex(d.ordinal());
    const GpuInfo* gpu = nullptr;
    for (const GpuInfo& g : *gpus) {
      if (index && g.index == *index) gpu = &g;
    }
    if (gpu == nullptr) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      spdlog::warn(
          "{}: not among the GPUs nvidia-smi lists (CUDA_VISIBLE_DEVICES {}); its "
          "name, memory and peak stay unknown",
          runner_device, visible ? absl::StrCat("'", visible, "'") : "unset");
      unidentified->push_back(runner_device);
      continue;
    }
    d.set_name(gpu->name);
    if (!options.keep_memory && gpu->memory_bytes > 0) d.set_memory_bytes(gpu->memory_bytes);
    spdlog::info("{}: {}, {} MiB", runner_device, gpu->name, d.memory_bytes() >> 20);
    if (options.peak) continue;
    const PeakTflops peak = PeakTflopsForGpuName(gpu->name);
    *d.mutable_peak_tflops() = ToProto(peak);
    if (peak == PeakTflops{}) {
      spdlog::warn("{}: no peak TFLOP/s known for '{}' (MFU reads 0); --peak-tflops sets it",
                   runner_device, gpu->name);
    } else {
      spdlog::info("{}: datasheet peak {}", runner_device, PeakText(peak));
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
      *best = PeakTflops::Max(*best, *peak);
    }
  }
  return best;
}

}  // namespace

void DescribeDevices(const DeviceProbeOptions& options, std::vector<v1::Device>* devices,
                     std::vector<std::string>* unidentified) {
  std::vector<std::string> ignored;
  if (unidentified == nullptr) unidentified = &ignored;
  bool any_cpu = false, any_cuda = false;
  for (const v1::Device& d : *devices) {
    any_cpu = any_cpu || d.type() == "cpu";
    any_cuda = any_cuda || d.type() == "cuda";  // other types: nothing to ask
  }
  if (any_cuda) DescribeGpus(options, devices, unidentified);
  if (options.peak) {
    for (v1::Device& d : *devices) *d.mutable_peak_tflops() = ToProto(*options.peak);
    spdlog::info("peak of every device (--peak-tflops): {}", PeakText(*options.peak));
  } else if (any_cpu && options.runner_path.empty()) {
    spdlog::warn(
        "no trial runner to measure the CPU's peak: MFU of cpu trials reads 0; "
        "--peak-tflops sets it");
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
}

}  // namespace autoaccel
