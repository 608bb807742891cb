#include "server/measurement_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/strings/str_format.h"
#include "spec/field_table.h"
#include "spec/trial_metrics_fields.h"

namespace autoaccel {
namespace {

double GiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 30); }

}  // namespace

std::string ImpossibleMeasurement(const TrialMetrics& m, const MeasurementLimits& limits,
                                  bool carries_throughput) {
  // Every figure of the metrics table: rates, times and fractions finite and
  // not negative (the loss is the model's, judged elsewhere), bytes not
  // negative.
  bool bad_figure = false, bad_memory = false;
  ForEachRow(kTrialMetricsFields, [&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::Value;
    const T& value = m.*field.member;
    if constexpr (std::is_same_v<T, double>) {
      bad_figure |= field.name != "final_loss" && (!std::isfinite(value) || value < 0);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      bad_memory |= value < 0;
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      bad_memory |= std::any_of(value.begin(), value.end(), [](int64_t b) { return b < 0; });
    }
  });
  if (bad_figure) return "impossible measurement: a figure is negative or not a finite number";
  if (bad_memory) return "impossible measurement: negative memory";
  if (carries_throughput) {
    const double per_device =
        m.tokens_per_second * limits.flops_per_token / std::max(1, limits.ranks);
    const bool peak_known = limits.device_peak_flops > 0;
    const double factor = limits.peak_from_catalog ? 1 + kPeakMargin : kSelfReportedPeakFactor;
    const double bound = peak_known
                             ? std::min(kMaxPlausibleDeviceFlops, limits.device_peak_flops * factor)
                             : kMaxPlausibleDeviceFlops;
    if (per_device > bound) {
      return peak_known
                 ? absl::StrFormat(
                       "impossible measurement: %.4g tokens/s needs %.3g TFLOP/s per device, "
                       "%.0fx the device's peak of %.3g TFLOP/s",
                       m.tokens_per_second, per_device / 1e12,
                       per_device / limits.device_peak_flops, limits.device_peak_flops / 1e12)
                 : absl::StrFormat(
                       "impossible measurement: %.4g tokens/s needs %.3g PFLOP/s per device, "
                       "more than any device computes",
                       m.tokens_per_second, per_device / 1e15);
    }
  }
  if (limits.device_memory_bytes > 0 &&
      static_cast<double>(m.peak_memory_bytes) >
          static_cast<double>(limits.device_memory_bytes) * (1 + kMemoryMargin)) {
    return absl::StrFormat("impossible measurement: a peak of %.3g GiB on a device of %.3g GiB",
                           GiB(m.peak_memory_bytes), GiB(limits.device_memory_bytes));
  }
  if (m.peak_memory_bytes > 0 && limits.weight_bytes > 0 &&
      static_cast<double>(m.peak_memory_bytes) <
          static_cast<double>(limits.weight_bytes) * kWeightFloor) {
    return absl::StrFormat(
        "impossible measurement: a peak of %.3g GiB, less than the %.3g GiB of weights the "
        "strategy holds on the device",
        GiB(m.peak_memory_bytes), GiB(limits.weight_bytes));
  }
  return "";
}

std::string MfuAbovePeak(const TrialMetrics& m) {
  if (!(m.peak_tflops > 0) || !(m.mfu > 1.0)) return "";
  return absl::StrFormat(
      "MFU %.1f%% is above 100%% of the devices' peak (%.3g TFLOP/s): the peak is under-measured "
      "or the measurement is wrong, so this trial is not eligible as the answer (restart the "
      "worker to probe again, or give it --peak-tflops)",
      100 * m.mfu, m.peak_tflops);
}

int DistrustedOfPair(double first, double first_peak, double second, double second_peak) {
  if (!(first > 0) || !(second > 0)) return 0;
  // 1 or 2 when one figure exceeds the other by more than the factor.
  const auto faster = [](double a, double b) {
    if (a > b * kPeerDisagreementFactor) return 1;
    if (b > a * kPeerDisagreementFactor) return 2;
    return 0;
  };
  const int raw = faster(first, second);
  if (raw == 0 || !(first_peak > 0) || !(second_peak > 0)) return raw;
  // Apart per unit of peak as well: a peak probed on a busy host is noise
  // that would otherwise blame an honest worker on the same hardware, and a
  // bigger machine's higher figure is explained by its peak.
  return faster(first / first_peak, second / second_peak) == raw ? raw : 0;
}

}  // namespace autoaccel
