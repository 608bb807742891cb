#include "engine/peak_probe.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <exception>

namespace autoaccel {
namespace {

constexpr int64_t kMinN = 128;
constexpr int64_t kMaxN = 2048;
// Grow n until one GEMM takes this long: big enough to amortise call
// overhead and fill the cores, small enough that the slow paths (fp16 on a
// CPU without it takes ~2.5 s at n = 1024) stay cheap.
constexpr double kTargetCallSeconds = 0.02;
// But grow to at least this n, as long as a call there is predicted (8x the
// last) to take under kMaxCallSeconds: on an oversubscribed machine a
// multi-threaded GEMM waits for a descheduled thread at every call, and a
// small n then looks slow for reasons a bigger one amortises.
constexpr int64_t kMinGrowN = 512;
constexpr double kMaxCallSeconds = 0.2;
constexpr int kTimedCalls = 5;
// Timed calls stop early once a precision has used this much.
constexpr double kBudgetSeconds = 0.2;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Best TFLOP/s of an n×n by n×n at::mm in `dtype`; for e4m3 at::_scaled_mm
// (the product fp8 linear layers use: second operand column-major, unit
// scales, bf16 out). Throws what LibTorch throws.
double BestGemmTflops(at::ScalarType dtype) {
  const Clock::time_point begin = Clock::now();
  const bool fp8 = dtype == at::kFloat8_e4m3fn;
  const at::Tensor one = at::ones({}, at::kFloat);
  int64_t n = kMinN;
  at::Tensor a, b, c;
  auto time_one = [&] {
    const Clock::time_point t = Clock::now();
    if (fp8) {
      at::_scaled_mm_out(c, a, b, one, one, std::nullopt, std::nullopt, at::kBFloat16);
    } else {
      at::mm_out(c, a, b);
    }
    return SecondsSince(t);
  };
  auto make = [&] {
    a = at::randn({n, n}, at::kFloat).to(dtype);
    b = at::randn({n, n}, at::kFloat).to(dtype);
    if (fp8) b = b.t();
    c = at::empty({n, n}, fp8 ? at::kBFloat16 : dtype);
  };
  make();
  time_one();  // the process's first GEMM: thread pool started, kernels chosen
  // Grow n until a GEMM takes kTargetCallSeconds. Each size is timed twice
  // and judged by the faster call, so neither the first call at a size
  // (buffers touched) nor one preempted call stops the growth early; the
  // calls at the final size count among its timed ones.
  double best_seconds = 0;
  int calls = 0;
  while (true) {
    best_seconds = std::min(time_one(), time_one());
    calls = 2;
    const bool small = n < kMinGrowN && 8 * best_seconds < kMaxCallSeconds;
    if (n >= kMaxN || (best_seconds >= kTargetCallSeconds && !small)) break;
    n *= 2;
    make();
  }
  while (calls < kTimedCalls && SecondsSince(begin) < kBudgetSeconds) {
    best_seconds = std::min(best_seconds, time_one());
    ++calls;
  }
  if (best_seconds <= 0) return 0;
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return flops / best_seconds / 1e12;
}

double BestGemmTflopsOrZero(at::ScalarType dtype) {
  try {
    return BestGemmTflops(dtype);
  } catch (const std::exception&) {  // c10::Error included: no such kernel here
    return 0;
  } catch (...) {
    return 0;
  }
}

}  // namespace

PeakTflops MeasureCpuPeakTflops(int num_threads) {
  at::set_num_threads(std::max(1, num_threads));
  PeakTflops peak;
  peak.fp32 = BestGemmTflopsOrZero(at::kFloat);
  peak.bf16 = BestGemmTflopsOrZero(at::kBFloat16);
  peak.fp16 = BestGemmTflopsOrZero(at::kHalf);
  peak.fp8 = BestGemmTflopsOrZero(at::kFloat8_e4m3fn);
  return peak;
}

}  // namespace autoaccel
