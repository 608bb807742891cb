// autoaccel-trial --spec SPEC.json --result RESULT.json
// autoaccel-trial --probe-peak [--threads N]
// autoaccel-trial --check-collectives DEVICE
//
// Runs one rank of one trial and writes its TrialResult. Exit status 0 when
// the result file was written, whatever the trial's status (OOM and FAILED
// included); 2 for bad arguments; 1 when the result cannot be written.
// Progress goes to stderr, one line per step.
//
// --probe-peak measures this CPU's GEMM peak with N intra-op threads
// (default 1; engine/peak_probe.h) and prints it as one line of JSON,
// {"bf16": X, "fp16": Y, "fp32": Z, "fp8": W} in TFLOP/s, on stdout; exit 0.
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "engine/cpu_memory.h"
#include "engine/distributed.h"
#include "engine/peak_probe.h"
#include "engine/trainer.h"
#include "trial_contract/json_file.h"
#include "trial_contract/trial_result.h"
#include "trial_contract/trial_spec.h"

namespace {

constexpr char kUsage[] =
    "usage: autoaccel-trial --spec SPEC.json --result RESULT.json\n"
    "       autoaccel-trial --probe-peak [--threads N]\n"
    "       autoaccel-trial --check-collectives cpu|cuda[:N]\n"
    "Runs one trial rank described by SPEC.json (a TrialSpec) and writes its\n"
    "TrialResult to RESULT.json (atomically). Exit 0 once the result is written.\n"
    "--probe-peak prints this CPU's measured GEMM peak with N threads (default 1)\n"
    "as one line of JSON: {\"bf16\": X, \"fp16\": Y, \"fp32\": Z, \"fp8\": W} (TFLOP/s).\n"
    "--check-collectives runs the process-group collectives of multi-rank trials\n"
    "on a one-rank group (gloo on cpu, NCCL on cuda); prints the backend, exit 0\n"
    "when every result is right, 1 otherwise.\n";

int Usage(const char* problem) {
  std::fprintf(stderr, "autoaccel-trial: %s\n%s", problem, kUsage);
  return 2;
}

struct Args {
  std::string spec;
  std::string result;
  bool probe_peak = false;
  std::string threads;            // --probe-peak only
  std::string check_collectives;  // a device
};

// Accepts "--flag VALUE" and "--flag=VALUE".
bool ParseArgs(int argc, char** argv, Args* args, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--probe-peak") {
      args->probe_peak = true;
      continue;
    }
    std::string* target = nullptr;
    std::string value;
    for (auto [name, out] :
         {std::pair<const char*, std::string*>{"--spec", &args->spec},
          std::pair<const char*, std::string*>{"--result", &args->result},
          std::pair<const char*, std::string*>{"--threads", &args->threads},
          std::pair<const char*, std::string*>{"--check-collectives", &args->check_collectives}}) {
      const size_t len = std::strlen(name);
      if (arg == name) {
        if (i + 1 >= argc) {
          *error = std::string(name) + " needs a value";
          return false;
        }
        target = out;
        value = argv[++i];
      } else if (arg.compare(0, len + 1, std::string(name) + "=") == 0) {
        target = out;
        value = arg.substr(len + 1);
      }
    }
    if (target == nullptr) {
      *error = "unknown argument '" + arg + "'";
      return false;
    }
    *target = value;
  }
  if (!args->check_collectives.empty()) {
    if (args->probe_peak || !args->spec.empty() || !args->result.empty()) {
      *error = "--check-collectives takes no other argument";
      return false;
    }
    return true;
  }
  if (args->probe_peak) {
    if (!args->spec.empty() || !args->result.empty()) {
      *error = "--probe-peak takes no --spec or --result";
      return false;
    }
    return true;
  }
  if (!args->threads.empty()) {
    *error = "--threads goes with --probe-peak (a trial's threads are in its spec)";
    return false;
  }
  if (args->spec.empty() || args->result.empty()) {
    *error = "--spec and --result are required";
    return false;
  }
  return true;
}

int ProbePeak(const std::string& threads_text) {
  int threads = 1;
  if (!threads_text.empty() &&
      (!absl::SimpleAtoi(threads_text, &threads) || threads < 1 || threads > 1024)) {
    return Usage(
        ("--threads: expected a whole number from 1 to 1024, got '" + threads_text + "'").c_str());
  }
  at::set_num_interop_threads(1);  // the probe runs no inter-op work
  const autoaccel::PeakTflops peak = autoaccel::MeasureCpuPeakTflops(threads);
  std::printf("%s\n", autoaccel::PeakTflopsToJson(peak).dump().c_str());
  return 0;
}

int CheckCollectivesOn(const std::string& device_text) {
  absl::StatusOr<torch::Device> device = autoaccel::ParseDevice(device_text);
  if (!device.ok()) {
    std::fprintf(stderr, "autoaccel-trial: %s\n", std::string(device.status().message()).c_str());
    return device.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  absl::StatusOr<std::string> backend = autoaccel::CheckCollectives(*device);
  if (!backend.ok()) {
    std::fprintf(stderr, "autoaccel-trial: collectives on %s: %s\n", device_text.c_str(),
                 std::string(backend.status().message()).c_str());
    return 1;
  }
  std::printf("collectives ok on %s (%s)\n", device_text.c_str(), backend->c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  std::string error;
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!ParseArgs(argc, argv, &args, &error)) return Usage(error.c_str());
  if (args.probe_peak) return ProbePeak(args.threads);
  if (!args.check_collectives.empty()) return CheckCollectivesOn(args.check_collectives);
  const std::string& spec_path = args.spec;
  const std::string& result_path = args.result;
  autoaccel::KeepFreedMemoryInTheHeap();

  autoaccel::TrialResult result;
  absl::StatusOr<nlohmann::json> json = autoaccel::ReadJsonFile(spec_path);
  absl::StatusOr<autoaccel::TrialSpec> spec =
      json.ok() ? autoaccel::TrialSpecFromJson(*json) : json.status();
  if (!spec.ok()) {
    result.status = autoaccel::TrialStatus::kFailed;
    result.error = "invalid trial spec: " + std::string(spec.status().message());
    std::fprintf(stderr, "autoaccel-trial: %s\n", result.error.c_str());
  } else {
    // Inter-op threads can be set only before any parallel work starts.
    const int threads = spec->num_threads > 0 ? spec->num_threads : 1;
    at::set_num_interop_threads(threads);
    at::set_num_threads(threads);
    result = autoaccel::RunTrial(*spec, [](const autoaccel::StepReport& r) {
      std::fprintf(stderr, "step %d/%d %s %.3fs loss %.4f\n", r.step, r.total_steps,
                   r.measured ? "measured" : "warmup", r.seconds, r.loss);
    });
    std::fprintf(stderr, "autoaccel-trial: %s%s%s\n",
                 std::string(autoaccel::TrialStatusName(result.status)).c_str(),
                 result.error.empty() ? "" : ": ", result.error.c_str());
  }
  absl::Status written =
      autoaccel::WriteJsonFile(result_path, autoaccel::TrialResultToJson(result));
  if (!written.ok()) {
    std::fprintf(stderr, "autoaccel-trial: %s\n", std::string(written.message()).c_str());
    return 1;
  }
  // The result is on disk: leave without LibTorch's static teardown (about
  // 0.2 s of every trial; bench/engine_trial_overhead.py), which has nothing
  // left to keep.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}
