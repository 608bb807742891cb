// From a proxy trial's measurement (search/proxy.h) to the full-size run's
// figures, with an interval: what `tune --proxy` ranks and answers with.
//
// STEP TIME. The measured proxy step, scaled by what the calibrated cost
// model (search/cost_model.h, in proxy mode: calibrated on the job's proxy
// measurements) says changes from the proxy to the full run:
//   T_full = T_proxy_measured · F_full / F_proxy
// F the model's step time of each: the layers of a stage, the pipeline's
// bubble ((p - 1) / (v · m)) and point-to-point sends, and the data- and
// model-parallel communication on the real topology (which groups cross
// nodes) are all in F. A ratio rather than a difference: an error of the
// model that scales every term alike (the achieved fraction of the peak)
// cancels, and only the model's split between what changes and what does
// not remains.
//
// INTERVAL. With r
//   r = sqrt(m² + (u · |F_full - F_proxy| / max(F_full, F_proxy))²)
// m half the proxy's measured step spread ((p90 - p10) / median / 2), u the
// model's relative error: the time fit's cross-validated error
// (CostModel::time_fit_error), at least kUnvalidatedModelError — the folds
// validate the model across proxies, all of one depth and size, not across
// the step from proxy to full run, which on CPU (docs/BENCHMARKS.md, "Proxy
// trials") it misses by more — applied to the share of the step that the
// model rather than the measurement supplies. The interval is [T / (1 + r),
// T · (1 + r)]: a factor either way, so never below 0.
//
// MEMORY. The measured proxy peak plus what the calibrated memory model
// says the full run adds (more layers per stage, fewer replicas to shard
// over, more micro-batches in flight): peak_full = peak_proxy + E_full -
// E_proxy; what the model leaves out (allocator, runtime) is in the
// measured peak and carries over.
//
// Pure; safe from any thread (the cost model is only read).
#ifndef AUTOACCEL_SEARCH_PROXY_EXTRAPOLATION_H_
#define AUTOACCEL_SEARCH_PROXY_EXTRAPOLATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "search/cost_model.h"
#include "spec/strategy.h"
#include "spec/trial.h"

namespace autoaccel {

// The least u: the cuda priors' step time is off by 19.3% at the 90th
// percentile of the published runs held out of their calibration
// (docs/BENCHMARKS.md, "GPU priors"); the cpu priors are not calibrated on
// published runs at all.
inline constexpr double kUnvalidatedModelError = 0.25;

struct Extrapolation {
  // The full run's figures: step times (median, min, max: the proxy's
  // scaled), tokens and samples per second over the job's global batch,
  // achieved TFLOP/s and MFU of the full model (against the full world's
  // peak), the peak memory, the proxy's steps, spread, noise and loss.
  // Per-rank memory and communication time are left out (0): the proxy's
  // ranks are not the full run's.
  TrialMetrics metrics;
  double step_time_low_s = 0;  // the interval around metrics.step_time_median_s
  double step_time_high_s = 0;
  double relative_uncertainty = 0;  // r above
  double model_ratio = 0;           // F_full / F_proxy
  Strategy proxy_strategy;          // what ran
  std::string proxy;                // ProxyMapping::Describe(): "2 of 8 layers on 2 of 4 ranks"
};

// The full-size figures of candidate `full` from its proxy trial's
// `measured` metrics (a SUCCEEDED trial's). FAILED_PRECONDITION when the
// model is not in proxy mode; INVALID_ARGUMENT when the candidate has no
// proxy (ProxyMapping::TrialOf's message) or the measurement has no
// positive step time.
absl::StatusOr<Extrapolation> Extrapolate(const CostModel& model, const Strategy& full,
                                          const TrialMetrics& measured);

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_PROXY_EXTRAPOLATION_H_
