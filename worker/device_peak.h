// Dense peak TFLOP/s of NVIDIA data-center GPUs, looked up by the model name
// `nvidia-smi --query-gpu=name` prints. The denominator of MFU on CUDA
// devices, which the worker registers (worker/device_discovery.h); CPU
// devices measure theirs instead (the trial runner's --probe-peak). Pure;
// thread-safe. The device catalog (search/device_catalog.json) repeats the
// peaks of the GPUs it lists; tests/device_peak_test.cc holds the two equal.
#ifndef AUTOACCEL_WORKER_DEVICE_PEAK_H_
#define AUTOACCEL_WORKER_DEVICE_PEAK_H_

#include "absl/strings/string_view.h"
#include "spec/trial.h"

namespace autoaccel {

// The vendor's datasheet peak without sparsity: bf16/fp16 on tensor cores,
// fp32 the plain (non-TF32) rate, since PyTorch does not use TF32 for matmuls
// by default. A precision the GPU has no tensor-core path for (bf16 before
// Ampere) reads 0, as does every figure of a name not in the table.
//
// Matching is by whole words of the name, case-insensitive, split at
// anything not a letter or digit: "NVIDIA A100-SXM4-80GB" is an A100, and
// "A10" does not match it. Variants come before their family
// ("H100 PCIe" and "H100 NVL" before plain "H100", which is the SXM part).
PeakTflops PeakTflopsForGpuName(absl::string_view name);

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_DEVICE_PEAK_H_
