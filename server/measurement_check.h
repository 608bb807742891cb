// Whether a worker's figures for a trial can be true, judged by what the
// coordinator knows itself — the model's FLOPs, its devices' registered peak
// and memory (a GPU the device catalog names: the catalog's peak), the
// weights the strategy must hold — never by what the answer says of itself.
// A worker holding the join token could otherwise store any throughput as
// another user's answer.
//
// A measurement that breaks a bound is recorded FAILED with the bound in its
// reason, is never an answer, and its worker is distrusted (quarantined by
// the job manager: server/worker_pool.h Distrust). The margins leave room for
// an honest device that beats its probed peak a little or measures memory a
// little differently; forged figures are off by orders of magnitude.
//
// Pure functions; any thread.
#ifndef AUTOACCEL_SERVER_MEASUREMENT_CHECK_H_
#define AUTOACCEL_SERVER_MEASUREMENT_CHECK_H_

#include <cstdint>
#include <string>

#include "spec/trial.h"

namespace autoaccel {

// No device computes faster than this (dense FLOP/s; today's fastest GPUs
// reach a tenth of it at 8-bit precision): the bound when a device's peak
// is unknown.
inline constexpr double kMaxPlausibleDeviceFlops = 2e16;
// Model FLOP/s per device up to (1 + this) times its peak pass, for a peak
// the coordinator knows from the device catalog (a GPU's datasheet).
inline constexpr double kPeakMargin = 0.25;
// ... and up to this many times a peak the worker registered itself: a
// cpu's probed peak can be under-measured on a busy host (the worker then
// raises it: worker/worker_service.h), so only a gross excess is proof.
inline constexpr double kSelfReportedPeakFactor = 4.0;
// Peak memory per rank up to (1 + this) times the device's memory passes.
inline constexpr double kMemoryMargin = 0.25;
// A measured peak memory (when measured: > 0) of at least this fraction of
// the weights the strategy holds per rank (the estimate may be off).
inline constexpr double kWeightFloor = 0.5;
// Two workers' measurements of one strategy further apart than this factor
// (in tokens/s and, when both peaks are known, per unit of peak too): the
// faster claim is distrusted. A forger claims faster; an honest busy worker
// is slower, and rarely by this much.
inline constexpr double kPeerDisagreementFactor = 3.0;

// What the coordinator knows of one rank's trial.
struct MeasurementLimits {
  double flops_per_token = 0;       // the model's training FLOPs per token; 0 unknown
  int ranks = 1;                    // devices the trial ran on
  double device_peak_flops = 0;     // the fastest precision's peak of its device; 0 unknown
  bool peak_from_catalog = false;   // ... from the device catalog, not the worker
  int64_t device_memory_bytes = 0;  // what its device holds at most; 0 unknown
  int64_t weight_bytes = 0;         // weights the strategy holds on the rank; 0 unknown
};

// Why one rank's figures cannot be true, or "" when they can: a figure that
// is negative or not finite; with `carries_throughput` (rank 0, which
// measures the gang's throughput) a throughput whose model FLOP/s per
// device exceeds the device's peak by more than kPeakMargin (a catalog
// peak) or kSelfReportedPeakFactor times (a registered one), or
// kMaxPlausibleDeviceFlops when the peak is unknown; a peak memory above
// the device's memory by more than kMemoryMargin, or, when measured, below
// kWeightFloor of the weights the rank must hold.
std::string ImpossibleMeasurement(const TrialMetrics& metrics, const MeasurementLimits& limits,
                                  bool carries_throughput = true);

// A trial measured above its devices' peak (MFU > 100%) as its worker
// reported the peak: the peak is too low, or the measurement is wrong. ""
// when MFU <= 100% or the peak is unknown; else a warning for the trial's
// reason. Such a trial is not eligible as the answer (search/searcher.h
// IsEligible).
std::string MfuAbovePeak(const TrialMetrics& metrics);

// Of two workers' measurements of one strategy (tokens/s, and the peak
// FLOP/s of the device each ran on, 0 when unknown): 1 when the first is to
// be distrusted, 2 the second, 0 when they are within
// kPeerDisagreementFactor of each other — in tokens/s, or, when both peaks
// are known, per unit of peak (a bigger device's higher figure is no lie,
// and a peak probed on a busy host does not make an honest figure one).
int DistrustedOfPair(double first_tokens_per_second, double first_peak_flops,
                     double second_tokens_per_second, double second_peak_flops);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_MEASUREMENT_CHECK_H_
