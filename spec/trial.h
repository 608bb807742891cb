// What one dry run (a trial) reports, shared by the coordinator, the worker
// and the trial runner. JSON keys are a stable contract.
#ifndef AUTOACCEL_SPEC_TRIAL_H_
#define AUTOACCEL_SPEC_TRIAL_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "spec/strategy.h"

namespace autoaccel {

enum class TrialStatus {
  kPending,    // proposed, not yet dispatched
  kRunning,    // dispatched to a gang of ranks
  kSucceeded,  // measured
  kOom,        // ran out of device memory: the strategy does not fit
  kFailed,     // crashed, bad loss, worker lost
  kTimeout,    // exceeded its deadline
  kPruned,     // never run: predicted or ruled infeasible
  kCancelled,  // stopped because the job ended or was cancelled
};

// "PENDING", "RUNNING", "SUCCEEDED", "OOM", "FAILED", "TIMEOUT", "PRUNED", "CANCELLED".
absl::string_view TrialStatusName(TrialStatus s);
absl::StatusOr<TrialStatus> ParseTrialStatus(absl::string_view name);
// True once the trial can no longer change.
bool IsTerminal(TrialStatus s);

struct TrialMetrics {
  int measured_steps = 0;
  double step_time_median_s = 0;
  double step_time_min_s = 0;
  double step_time_max_s = 0;
  double tokens_per_second = 0;  // global batch tokens / median step time
  double samples_per_second = 0;
  double achieved_tflops = 0;     // model FLOPs / median step time / 1e12
  int64_t peak_memory_bytes = 0;  // peak tensor memory of the rank (max over ranks)
  int64_t peak_rss_bytes = 0;     // peak resident set of the trial process
  double final_loss = 0;
  // fp16: measured steps whose optimizer update was skipped because a
  // gradient overflowed (the loss scale then shrinks). Such a step skips the
  // optimizer, so many of them make the step time optimistic.
  int skipped_steps = 0;
  // Multi-rank trials: per-step time a rank spent in collectives it waited
  // for (gradient all-reduce / reduce-scatter, parameter all-gather, tensor
  // and pipeline exchanges), median over measured steps, the maximum over
  // ranks; 0 for a single rank. Step times are the slowest rank's.
  double comm_time_s = 0;
  // Tensor memory a rank still holds between steps (after the last measured
  // step: weights, gradients, optimizer state, the batch) — the model state
  // that sharding divides; the max over ranks. 0 when not measured.
  int64_t state_memory_bytes = 0;
  // Peak tensor memory of each rank, by rank (peak_memory_bytes is the max);
  // empty when unknown.
  std::vector<int64_t> rank_peak_memory_bytes;
  double mfu = 0;  // achieved_tflops / peak_tflops; 0 when the peak is unknown
  // Dense peak at the trial's compute precision of the devices that ran it:
  // one device's peak times the number of ranks (achieved_tflops is the
  // gang's too).
  double peak_tflops = 0;

  // How widely the measured step times spread: (p90 - p10) / median, the
  // middle 80% of the steps (one preempted step among hundreds does not make
  // a measurement noisy); 0 when not measured (older results).
  double step_time_spread = 0;

  // Step times spread by more than 20% of the median: the throughput figure
  // is less trustworthy (a busy machine, a data-dependent kernel, too few
  // measured steps). Uses step_time_spread, or (max - min) / median where it
  // is not measured.
  bool IsNoisy() const {
    if (step_time_spread > 0) return step_time_spread > kNoisySpread;
    return step_time_median_s > 0 &&
           (step_time_max_s - step_time_min_s) > kNoisySpread * step_time_median_s;
  }
  static constexpr double kNoisySpread = 0.2;
};

// What the cost model predicted for a trial's strategy when the search
// proposed it (search/cost_model.h CostModel::Predict, calibrated on the
// trials measured before it), kept beside what the trial measured so a user
// can see how far to trust the model. step_time_s 0: no time prediction;
// peak_memory_bytes 0: no memory prediction (a torchscript model's shape is
// unknown).
struct TrialPrediction {
  double step_time_s = 0;
  int64_t peak_memory_bytes = 0;  // per device, worst rank: the estimate's total()
  double tokens_per_second = 0;   // global batch tokens / step_time_s
  friend bool operator==(const TrialPrediction& a, const TrialPrediction& b) {
    return a.step_time_s == b.step_time_s && a.peak_memory_bytes == b.peak_memory_bytes &&
           a.tokens_per_second == b.tokens_per_second;
  }
};

// {"step_time_s", "peak_memory_bytes", "tokens_per_second"}; missing keys
// read as 0, negative or non-numeric values give INVALID_ARGUMENT naming
// "predicted.<key>".
nlohmann::json TrialPredictionToJson(const TrialPrediction& p);
absl::StatusOr<TrialPrediction> TrialPredictionFromJson(const nlohmann::json& j);

// What a proxy trial (tune --proxy, search/proxy.h) ran and measured, kept
// beside the full run's figures extrapolated from it
// (search/proxy_extrapolation.h), which are the trial's metrics.
struct ProxyMeasurement {
  std::string proxy;          // "2 of 8 layers on 2 of 4 ranks"
  std::string strategy_text;  // the proxy's own strategy (canonical text)
  TrialMetrics measured;
  // The extrapolated step time's interval, [T / (1 + r), T · (1 + r)], and r.
  double step_time_low_s = 0;
  double step_time_high_s = 0;
  double relative_uncertainty = 0;
};

// {"proxy", "strategy", "measured": TrialMetricsToJson, "step_time_low_s",
// "step_time_high_s", "relative_uncertainty"}. INVALID_ARGUMENT naming
// "proxy.<key>" for a value of the wrong type or a negative number.
nlohmann::json ProxyMeasurementToJson(const ProxyMeasurement& p);
absl::StatusOr<ProxyMeasurement> ProxyMeasurementFromJson(const nlohmann::json& j);

// Dense peak throughput of one device in TFLOP/s per compute precision; 0 =
// unknown. CUDA devices take it from a table of GPU models, CPU devices from
// a GEMM probe the worker runs when it starts.
// A device without fp8 matrix units (compute capability under 8.9) has fp8
// 0; a device_supports_fp8 test is fp8 > 0.
struct PeakTflops {
  double fp32 = 0;
  double bf16 = 0;
  double fp16 = 0;
  double fp8 = 0;

  // The member holding the peak a strategy of precision `p` computes its
  // matrix products at: bf16 for bf16 and pure_bf16, fp16 for fp16, fp32 for
  // fp32, fp8 for fp8 (its linear layers; the rest runs at bf16's).
  static double PeakTflops::*MemberFor(Precision p);
  double For(Precision p) const { return this->*MemberFor(p); }
  // Each precision's larger peak.
  static PeakTflops Max(const PeakTflops& a, const PeakTflops& b);
  friend bool operator==(const PeakTflops& a, const PeakTflops& b) {
    return a.fp32 == b.fp32 && a.bf16 == b.bf16 && a.fp16 == b.fp16 && a.fp8 == b.fp8;
  }
};

// One row per member of PeakTflops, named as in JSON, the wire
// (v1::PeakTflops) and the worker's --peak-tflops: every codec walks it.
struct PeakTflopsField {
  absl::string_view name;
  double PeakTflops::*member;
};
inline constexpr PeakTflopsField kPeakTflopsFields[] = {{"fp32", &PeakTflops::fp32},
                                                        {"bf16", &PeakTflops::bf16},
                                                        {"fp16", &PeakTflops::fp16},
                                                        {"fp8", &PeakTflops::fp8}};
// "fp32 67, bf16 989, fp16 989, fp8 1979 TFLOP/s" (logs, test failures).
std::ostream& operator<<(std::ostream& os, const PeakTflops& p);

// {"fp32": x, "bf16": y, "fp16": z, "fp8": w}; missing keys read as 0, negative or
// non-numeric values give INVALID_ARGUMENT.
nlohmann::json PeakTflopsToJson(const PeakTflops& p);
absl::StatusOr<PeakTflops> PeakTflopsFromJson(const nlohmann::json& j);

nlohmann::json TrialMetricsToJson(const TrialMetrics& m);
// Missing keys stay zero; wrong types give INVALID_ARGUMENT.
absl::StatusOr<TrialMetrics> TrialMetricsFromJson(const nlohmann::json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_TRIAL_H_
