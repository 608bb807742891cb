// What the worker learns of its devices when it starts: each GPU's model,
// memory and datasheet peak from nvidia-smi (worker/device_peak.h), and the
// CPU's peak measured by the trial runner's GEMM probe
// (`autoaccel-trial --probe-peak`, MeasureCpuPeakTflops). The peaks are MFU's
// denominators; the coordinator learns them from the registration.
#ifndef AUTOACCEL_WORKER_DEVICE_DISCOVERY_H_
#define AUTOACCEL_WORKER_DEVICE_DISCOVERY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"
#include "spec/trial.h"

namespace autoaccel {

// How the worker learns what its devices are when it starts.
struct DeviceProbeOptions {
  std::string runner_path;  // cpu: runs `RUNNER --probe-peak --threads N`; "": no probe
  int threads_per_device = 1;
  // cpu: the probe runs this many times a moment apart and the best figure
  // per precision is kept (a peak must not be under-measured).
  int probe_repeats = 3;
  std::string work_dir;  // the probes' output and logs
  // --peak-tflops: every device's peak; nothing is probed for it.
  std::optional<PeakTflops> peak;
  // --device-memory was given: nvidia-smi's memory.total is not used.
  bool keep_memory = false;
  // Queried as `NVIDIA_SMI --query-gpu=index,name,memory.total
  // --format=csv,noheader,nounits`; a path or a name in $PATH.
  std::string nvidia_smi = "nvidia-smi";
  absl::Duration timeout = absl::Minutes(1);  // per probe
};

// Fills in `devices` as ParseDevices (worker/worker_flags.h) made them.
// cuda devices: name = the GPU model nvidia-smi reports for the ordinal
// (renumbered through a numeric CUDA_VISIBLE_DEVICES), memory_bytes = its
// memory.total unless keep_memory, peak_tflops from PeakTflopsForGpuName.
// cpu devices: peak_tflops measured by the trial runner's probe (none
// without a runner). Other accelerator types (musa, xpu, ...): nothing is
// asked. An explicit `peak` replaces every peak source. Never fails: what cannot be learnt (no
// nvidia-smi, a probe that fails) stays as it was, peak 0 = unknown, and a
// warning is logged.
// Blocks while the probes run (a few seconds, most of it loading LibTorch);
// writes its probes' output and logs to work_dir. Call from one thread at a
// time (it reads CUDA_VISIBLE_DEVICES); `devices` is the caller's.
// `unidentified`, when given, receives the cuda devices ("cuda:N") that
// nvidia-smi did not list (or all of them when it cannot be run): on such a
// machine a trial could not run there.
void DescribeDevices(const DeviceProbeOptions& options, std::vector<v1::Device>* devices,
                     std::vector<std::string>* unidentified = nullptr);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_DEVICE_DISCOVERY_H_
