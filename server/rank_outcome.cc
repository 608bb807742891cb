#include "server/rank_outcome.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace autoaccel {

namespace {

// A worker's reason is stored and shown: a few lines of log, never a dump.
constexpr size_t kMaxReasonBytes = 4096;

std::string Bounded(absl::string_view reason) {
  if (reason.size() <= kMaxReasonBytes) return std::string(reason);
  return absl::StrCat(reason.substr(0, kMaxReasonBytes), "... (", reason.size() - kMaxReasonBytes,
                      " more bytes)");
}

}  // namespace

RankOutcome RankOutcomeOf(const absl::Status& rpc, const v1::RunTrialResponse& response) {
  RankOutcome out;
  if (rpc.ok()) {
    absl::StatusOr<TrialStatus> status = ParseTrialStatus(response.status());
    if (!status.ok()) {
      out.reason = absl::StrCat("worker answered an unknown status: ", response.status());
      return out;
    }
    out.status = *status;
    out.reason = Bounded(response.reason());
    out.infrastructure = out.status == TrialStatus::kFailed && response.infrastructure();
    return out;
  }
  out.reason = Bounded(rpc.message());
  switch (rpc.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      out.status = TrialStatus::kTimeout;
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      break;
    default:
      out.infrastructure = true;
      break;
  }
  return out;
}

std::string ImpossibleMeasurement(const TrialMetrics& m, double flops_per_token, int ranks) {
  const double figures[] = {m.tokens_per_second,
                            m.samples_per_second,
                            m.step_time_median_s,
                            m.step_time_min_s,
                            m.step_time_max_s,
                            m.achieved_tflops,
                            m.mfu,
                            m.peak_tflops,
                            m.comm_time_s};
  for (double f : figures) {
    if (!std::isfinite(f) || f < 0) {
      return "impossible measurement: a figure is negative or not a finite number";
    }
  }
  if (m.peak_memory_bytes < 0 || m.state_memory_bytes < 0) {
    return "impossible measurement: negative memory";
  }
  const double per_device = m.tokens_per_second * flops_per_token / std::max(1, ranks);
  if (per_device > kMaxPlausibleDeviceFlops) {
    return absl::StrFormat(
        "impossible measurement: %.4g tokens/s needs %.3g PFLOP/s per device, more than any "
        "device computes",
        m.tokens_per_second, per_device / 1e15);
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

}  // namespace autoaccel
