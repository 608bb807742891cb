// The CPU peak probe: measured GEMM TFLOP/s, in-process and through
// `autoaccel-trial --probe-peak`, as the worker runs it.
#include "engine/peak_probe.h"

#include <ATen/ATen.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spec/trial.h"

namespace autoaccel {
namespace {

// Whether this LibTorch build has a CPU GEMM kernel for fp16, and one for
// fp8 (at::_scaled_mm of e4m3 operands): some have none, and the probe must
// then say "unknown", 0, not a figure.
bool CpuHasFp16Gemm() {
  try {
    at::mm(at::ones({4, 4}, at::kHalf), at::ones({4, 4}, at::kHalf));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool CpuHasFp8Gemm() {
  try {
    const at::Tensor a = at::ones({16, 16}).to(at::kFloat8_e4m3fn), one = at::ones({});
    at::_scaled_mm(a, a.t(), one, one, std::nullopt, std::nullopt, at::kBFloat16);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The probe's contract for a precision that may lack a kernel: 0 (unknown)
// exactly when there is none, else a positive, finite, CPU-sized figure.
void ExpectPeakMatchesTheKernel(const char* precision, double peak, bool has_kernel) {
  if (has_kernel) {
    EXPECT_GT(peak, 0) << "a " << precision << " GEMM runs here: its peak is measurable";
    EXPECT_TRUE(std::isfinite(peak)) << precision << " " << peak;
    EXPECT_LT(peak, 1000) << precision;
  } else {
    EXPECT_EQ(peak, 0) << "no " << precision << " GEMM here: its peak is unknown (0)";
  }
}

void ExpectOptionalPeaksMatchTheKernels(const PeakTflops& peak) {
  ExpectPeakMatchesTheKernel("fp16", peak.fp16, CpuHasFp16Gemm());
  ExpectPeakMatchesTheKernel("fp8", peak.fp8, CpuHasFp8Gemm());
}

TEST(PeakProbeTest, MeasuresPositiveFiguresQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const PeakTflops peak = MeasureCpuPeakTflops(1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(peak.fp32, 0);
  // bf16 may be orders of magnitude slower on a CPU without native bf16, but
  // it runs; fp16 and fp8 may have no CPU kernel at all in some builds (0 =
  // unknown). A positive fp8 figure is what tells the coordinator that this
  // CPU runs fp8 trials.
  EXPECT_GT(peak.bf16, 0);
  ExpectOptionalPeaksMatchTheKernels(peak);
  // Far above any CPU: a unit slip (FLOP/s vs TFLOP/s) would show here.
  EXPECT_LT(peak.fp32, 1000);
  EXPECT_LT(peak.bf16, 1000);
  EXPECT_LT(seconds, 5) << "the probe delays every worker's start";
}

// What the worker runs: one line of JSON on stdout, exit 0.
TEST(PeakProbeTest, TheTrialRunnerPrintsThePeakAsOneJsonLine) {
  const std::string cmd =
      std::string("'") + AUTOACCEL_TRIAL_BINARY + "' --probe-peak --threads 1 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "more than one line: " << out;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  absl::StatusOr<PeakTflops> peak = PeakTflopsFromJson(j);
  ASSERT_TRUE(peak.ok()) << peak.status();
  EXPECT_GT(peak->fp32, 0);
  EXPECT_GT(peak->bf16, 0);
  ExpectOptionalPeaksMatchTheKernels(*peak);
  EXPECT_TRUE(j.contains("fp8")) << out;
}

TEST(PeakProbeTest, TheTrialRunnerRejectsBadProbeArguments) {
  for (const char* args : {"--probe-peak --threads 0", "--probe-peak --threads x",
                           "--probe-peak --spec s.json", "--threads 2 --spec s --result r"}) {
    const std::string cmd =
        std::string("'") + AUTOACCEL_TRIAL_BINARY + "' " + args + " >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args;
  }
}

}  // namespace
}  // namespace autoaccel
