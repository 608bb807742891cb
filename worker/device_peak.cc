#include "worker/device_peak.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"

namespace autoaccel {
namespace {

struct GpuPeak {
  const char* model;    // a word of the name, upper case
  const char* variant;  // a second word that must also appear; "" for none
  PeakTflops peak;      // {fp32, bf16, fp16, fp8}
};

// NVIDIA's datasheet figures, dense. The datasheets print tensor-core rates
// "with sparsity" (footnoted: half without); these are the halves, rounded
// down to whole TFLOP/s where the half is not a whole number (H100 SXM:
// 1,979* -> 989; its fp8 3,958* -> 1,979). fp8 is 0 before Ada and Hopper
// (compute capability 8.9): Ampere, Volta and Turing have no fp8 tensor cores. fp32 is the
// non-tensor FP32 line. The A10G (AWS G5) has no public NVIDIA datasheet: 35 FP32 and 70 BF16/FP16
// dense are the figures commonly published for it, and what its 80 SMs at 1.71 GHz give with
// GA102's half-rate fp32-accumulate tensor path.
// First match wins: each variant before its family's default.
const GpuPeak kGpuPeaks[] = {
    // Hopper. Plain "H100" ("NVIDIA H100 80GB HBM3") is the SXM5 part.
    {"H100", "PCIE", {51, 756, 756, 1513}},
    {"H100", "NVL", {60, 835, 835, 1670}},
    {"H100", "", {67, 989, 989, 1979}},
    {"H200", "NVL", {60, 835, 835, 1670}},
    {"H200", "", {67, 989, 989, 1979}},
    {"GH200", "", {67, 989, 989, 1979}},
    {"H800", "PCIE", {51, 756, 756, 1513}},
    {"H800", "", {67, 989, 989, 1979}},
    // Ampere. SXM4 and PCIe A100s have the same peaks.
    {"A100", "", {19.5, 312, 312}},
    {"A800", "", {19.5, 312, 312}},
    {"A30", "", {10.3, 165, 165}},
    {"A10G", "", {35, 70, 70}},
    {"A10", "", {31.2, 125, 125}},
    // Ada.
    {"L40S", "", {91.6, 362.05, 362.05, 733}},
    {"L40", "", {90.5, 181.05, 181.05, 362}},
    {"L4", "", {30.3, 121, 121, 242.5}},
    // Volta and Turing: fp16 tensor cores, no bf16 ones.
    {"V100S", "", {16.4, 0, 130}},
    {"V100", "PCIE", {14, 0, 112}},
    {"V100", "", {15.7, 0, 125}},
    {"T4", "", {8.1, 0, 65}},
};

// Upper-case words of `name`, split at anything not a letter or digit.
std::vector<std::string> Words(absl::string_view name) {
  std::vector<std::string> words;
  std::string word;
  for (char c : name) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      word.push_back(absl::ascii_toupper(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

}  // namespace

PeakTflops PeakTflopsForGpuName(absl::string_view name) {
  const std::vector<std::string> words = Words(name);
  auto has = [&](absl::string_view w) {
    for (const std::string& x : words) {
      if (x == w) return true;
    }
    return false;
  };
  for (const GpuPeak& g : kGpuPeaks) {
    if (has(g.model) && (g.variant[0] == '\0' || has(g.variant))) return g.peak;
  }
  return PeakTflops{};
}

}  // namespace autoaccel
