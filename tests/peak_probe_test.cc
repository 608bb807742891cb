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

// Whether this LibTorch build has a CPU GEMM kernel for fp16 (some have
// none: the probe must then say "unknown", 0, not a figure).
bool CpuHasFp16Gemm() {
  try {
    at::mm(at::ones({4, 4}, at::kHalf), at::ones({4, 4}, at::kHalf));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The probe's contract for a precision that may lack a kernel: 0 (unknown)
// exactly when at::mm has none, else a positive, finite, CPU-sized figure.
void ExpectFp16PeakMatchesTheKernel(double fp16) {
  if (CpuHasFp16Gemm()) {
    EXPECT_GT(fp16, 0) << "an fp16 GEMM runs here: its peak is measurable";
    EXPECT_TRUE(std::isfinite(fp16)) << fp16;
    EXPECT_LT(fp16, 1000);
  } else {
    EXPECT_EQ(fp16, 0) << "no fp16 GEMM here: its peak is unknown (0)";
  }
}

TEST(PeakProbeTest, MeasuresPositiveFiguresQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const PeakTflops peak = MeasureCpuPeakTflops(1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(peak.fp32, 0);
  // bf16 may be orders of magnitude slower on a CPU without native bf16, but
  // it runs; fp16 may have no CPU kernel at all in some builds (0 = unknown).
  EXPECT_GT(peak.bf16, 0);
  ExpectFp16PeakMatchesTheKernel(peak.fp16);
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
  ExpectFp16PeakMatchesTheKernel(peak->fp16);
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
