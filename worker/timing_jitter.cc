#include "worker/timing_jitter.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <vector>

#include "spec/step_statistics.h"

namespace autoaccel {
namespace {

constexpr int kN = 48;
using Matrix = std::array<double, kN * kN>;

// `repeats` products of two fixed matrices; returns a value that depends on
// every product, so no compiler drops the work.
double Kernel(int repeats) {
  static Matrix a, b;
  static const bool filled = [] {
    for (int i = 0; i < kN * kN; ++i) {
      a[i] = 1.0 + (i % 7) * 0.125;
      b[i] = 1.0 - (i % 5) * 0.0625;
    }
    return true;
  }();
  (void)filled;
  Matrix c{};
  double sum = 0;
  for (int r = 0; r < repeats; ++r) {
    for (int i = 0; i < kN; ++i) {
      for (int k = 0; k < kN; ++k) {
        const double aik = a[i * kN + k];
        for (int j = 0; j < kN; ++j) c[i * kN + j] += aik * b[k * kN + j];
      }
    }
    sum += c[r % (kN * kN)];
  }
  return sum;
}

double SecondsOf(int repeats, volatile double* sink) {
  const auto start = std::chrono::steady_clock::now();
  *sink = *sink + Kernel(repeats);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double MeasureTimingJitter(const TimingJitterOptions& options) {
  volatile double sink = 0;
  // Size the kernel to about `each` (doubling; the first runs warm caches).
  int repeats = 1;
  const double target = absl::ToDoubleSeconds(options.each);
  while (repeats < (1 << 20) && SecondsOf(repeats, &sink) < target) repeats *= 2;
  double quietest = -1;
  for (int b = 0; b < std::max(1, options.batches); ++b) {
    std::vector<double> times;
    for (int i = 0; i < std::max(3, options.runs); ++i) times.push_back(SecondsOf(repeats, &sink));
    TrialMetrics m;
    SetStepTimeFigures(times, &m);
    if (quietest < 0 || m.step_time_spread < quietest) quietest = m.step_time_spread;
  }
  return quietest;
}

}  // namespace autoaccel
