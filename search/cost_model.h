// The cost model: how many bytes a strategy needs on each device and how
// long one optimizer step takes, from the model's shape and the device, with
// a few free coefficients refitted from measured trials as a job runs. The
// formulas are the two halves' (each with its sources):
//   memory  search/memory_estimate.h (EstimateMemory)
//   time    search/step_time.h (StepTimeFeatures, PredictStepTime)
// This file is the whole model for one job and its calibration.
//
// CALIBRATION (CostModel::Observe): after each measured trial both halves'
// coefficients are refitted from every observation so far, by
// non-negative least squares on relative errors with a pull towards the
// priors (see CostModel).
//
// WARM START (CostModel::WarmStart): before its first trial, a job's model
// may be fed the measured trials of earlier jobs on the same device type,
// each with its own model and sequence length (EarlierTrial). What carries
// over: the time coefficients are seconds per unit of a physical quantity
// (per FLOP at a precision, per byte moved, per kernel launch) of the
// device and the engine, not of the model, so another model's trials pin
// them as well as the job's own; the memory half's activation factor (how
// far the engine's activations differ from the papers' formula) and
// overhead (allocator, workspace, runtime) are also properties of the engine
// and device rather than of the model, so they carry over too — on the
// recorded tables (bench/search_replay, docs/BENCHMARKS.md) warming both
// halves cut the memory error before any trial from 18-20% to 6-12% and
// raised the throughput rank correlation on every table. The earlier
// observations together weigh kEarlierTrialsWeight of the job's own in
// both fits, so the job's own trials take over as they come in (its own
// model may use kernels the others did not). A device type is "cpu" or
// "cuda": different GPU models share one history (a per-model key would
// need the device's name stored with each trial).
#ifndef AUTOACCEL_SEARCH_COST_MODEL_H_
#define AUTOACCEL_SEARCH_COST_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "search/memory_estimate.h"
#include "search/proxy.h"
#include "search/step_time.h"
#include "spec/model_spec.h"
#include "spec/strategy.h"
#include "spec/trial.h"

namespace autoaccel {

// A measured trial of an earlier job on the same device type: its own
// model and sequence length, the strategy and what it measured.
// REQUIRES: model.Validate() OK and not torchscript (its shape is unknown),
// seq_len > 0.
struct EarlierTrial {
  ModelSpec model;
  int seq_len = 0;
  Strategy strategy;
  TrialMetrics metrics;  // a SUCCEEDED trial's
};

// How much a warm start's earlier trials count in the fits, all together,
// against 1 for each of the job's own trials (each earlier trial weighs
// this / their number, at most 1): the worth of 4 of the job's own. Enough
// to carry the fit before the job has measured anything (both halves'
// priors pull with weight 1e-3), and little enough that a handful of the
// job's own trials take over where its model differs (its own kernels,
// its own activation factor). Chosen on the recorded tables
// (bench/search_replay): 2 to 20 gave the same predictions before any
// trial; above 4 the job's own first trials moved the memory fit too
// slowly (at 50, bert-w1's first 10 predictions' memory error was 1.7%,
// against 0.7% cold).
inline constexpr double kEarlierTrialsWeight = 4;
// The most earlier trials a warm start reads (the newest): a refit's cost
// grows with the observations (about 20 ms at 300, under the searcher's
// lock on every reported trial), and 200 already cover a device's layouts
// and precisions several times over.
inline constexpr int kMaxEarlierTrials = 200;
// Each half is refitted at each of the job's first
// kRefitEveryObservationUpTo measured trials feeding it, then whenever they
// have grown by kRefitGrowth since its last refit (an out-of-memory trial
// refits the memory half at once). A refit costs O(observations) (60
// small solves), and the coordinator reports every result under its lock:
// refitting at each of a long job's results was 77% of the coordinator's
// time with 160 devices busy (bench/scale.py --perf), and made it the limit
// on results per second. A tenth more data moves a fit of dozens little.
inline constexpr int kRefitEveryObservationUpTo = 64;
inline constexpr double kRefitGrowth = 0.1;

// The whole model for one job: memory and time, with online calibration.
//
// Calibration, after every observation, from all observations so far:
//   time    minimises sum_i ((x_i·c - t_i) / t_i)^2
//                     + lambda · sum_k ((c_k - p_k) / p_k)^2,  c >= 0,
//           p the prior: relative errors, so that fast and slow trials
//           weigh alike. A feature no observation exercised keeps its prior.
//           lambda is 1e-3 (a prior worth about one observation with 3%
//           noise, on coefficients known within ~2x) until 6 observations,
//           then the one of 1e-1 ... 1e-6 with the least cross-validated
//           error (leave-one-out, 10-fold past 10 observations): a fixed
//           weight either holds on to the prior where the data disagrees (a
//           feature with a small share of every observed step barely moves
//           and the big ones make up for it) or lets noise move what the
//           data pins down poorly. Refits from the first observation.
//   memory  measured_peak_i - (model state + gathered + logits)_i
//               ~= f · activations_i + o,  f, o >= 0,
//           relative to measured_peak_i, with a weak pull (lambda 1e-3)
//           towards f = 1 (scale 1) and o = 0 (scale: the mean measured
//           peak). Needs 2 observations; the priors (the papers' figures)
//           stand until then.
// Both are non-negative least squares (Lawson and Hanson's active set) in
// u_k = c_k / p_k. A refit costs up to 60 small solves (6 weights x 10
// folds) of observations x 13: about 20 ms at 300 observations.
//
// Not thread-safe: const members may run concurrently with each other, but
// Observe() needs the caller's exclusive access (the searcher's lock).
class CostModel {
 public:
  // REQUIRES: model.Validate() OK, seq_len > 0, global_batch_size > 0.
  CostModel(ModelSpec model, int seq_len, int global_batch_size, DeviceSpec device);

  struct Prediction {
    MemoryEstimate memory;         // per device, worst rank, calibrated coefficients
    double step_time_s = 0;        // calibrated
    double tokens_per_second = 0;  // global_batch_size * seq_len / step_time_s; 0 if no time
  };
  // REQUIRES: the strategy's degrees and sizes positive.
  Prediction Predict(const Strategy& s) const;

  // True when the strategy's calibrated memory estimate fits the device:
  // memory.total() <= device.memory_bytes * (1 + margin), or memory_bytes is
  // 0 (unknown), or the model is torchscript (its shape is unknown). When it
  // does not fit, *reason (if not null) says why, with the biggest parts, e.g.
  // "predicted 41.2 GiB per device (activations 30.1 GiB, model state 9.0
  // GiB, logits 1.5 GiB) exceeds the device's 39.4 GiB"; it is left alone
  // when the strategy fits.
  bool Fits(const Strategy& s, double margin, std::string* reason) const;
  // The same test of a memory estimate already predicted (Predict(s).memory),
  // without the reason: for ranking many strategies.
  bool Fits(const MemoryEstimate& memory, double margin) const;

  // Records a measured trial and refits the coefficients of both halves
  // from all observations (the time half on kRefitGrowth's schedule once
  // the job has many). A kSucceeded trial counts with its metrics:
  // step_time_median_s > 0 feeds the time half and peak_memory_bytes > 0 the
  // memory half (a torchscript model has no memory half). A kOom trial is a
  // lower bound for the memory half when the device's memory is known: the
  // strategy needed more than the device has, so a fit that predicts less
  // for it is refitted with it held at the device's memory (repeated until
  // no out-of-memory strategy is predicted to fit). Anything else is ignored.
  void Observe(const Strategy& s, const TrialMetrics& measured,
               TrialStatus status = TrialStatus::kSucceeded);

  // Warm start: records earlier jobs' measured trials (each computed with
  // its own model and seq_len, together weighted kEarlierTrialsWeight) and
  // refits both
  // halves once. Trials with no positive finite step time and no positive
  // peak, and torchscript ones, are skipped. Returns how many were used.
  // Meant once, before the job's first Observe(), though any order gives the
  // same fit. Costs one refit of both halves with that many observations
  // (and every later refit carries them too).
  int WarmStart(const std::vector<EarlierTrial>& trials);

  // What Predict() says, in the form a trial record keeps: step time,
  // tokens/s and the memory estimate's total() (0 for a torchscript model,
  // whose memory the model cannot estimate).
  TrialPrediction PredictTrial(const Strategy& s) const;

  // PROXY MODE (tune --proxy, search/proxy.h): the job's trials run each
  // candidate's proxy trial instead of the candidate. Observe() then takes
  // the proxy trial's measurements and calibrates on the proxy's own
  // features (its model, strategy and ranks; a candidate without a proxy is
  // not observed); Predict() still predicts the full-size candidate, and
  // PredictProxy() its proxy trial: what search/proxy_extrapolation.h
  // extrapolates with. REQUIRES: before the first Observe(); `mapping`'s
  // full setup is this model's.
  void UseProxy(ProxyMapping mapping);
  // The mapping in proxy mode; null otherwise.
  const ProxyMapping* proxy() const { return proxy_ ? &proxy_->mapping : nullptr; }
  // The calibrated prediction of candidate s's proxy trial (tokens/s over
  // the proxy's global batch); nullopt when not in proxy mode or s has no
  // proxy (ProxyMapping::TrialOf's error).
  std::optional<Prediction> PredictProxy(const Strategy& s) const;
  // The same of a proxy trial already mapped (mapping's TrialOf).
  // REQUIRES: proxy mode.
  Prediction PredictProxy(const ProxyTrial& t) const;
  // The time fit's cross-validated root-mean-square relative error (the
  // folds that choose the prior's weight, see CostModel); 0 until the time
  // half has been refitted on enough observations to validate (6).
  double time_fit_error() const { return time_fit_error_; }

  // Trials Observe() has recorded (those that fed at least one half).
  int observations() const { return observations_; }
  // Grows at every refit of either half: predictions made at the same
  // value are the same (the searcher recomputes its candidates' only when
  // it changed).
  uint64_t fits() const { return fits_; }
  // Earlier jobs' trials WarmStart() used.
  int earlier_observations() const { return earlier_observations_; }
  const TimeCoefficients& time_coefficients() const { return time_; }
  const MemoryCoefficients& memory_coefficients() const { return memory_; }
  const DeviceSpec& device() const { return device_; }

 private:
  struct TimeObservation {
    TimeFeatures x;
    double seconds;
    double weight = 1;  // less for an earlier job's (kEarlierTrialsWeight)
  };
  struct MemoryObservation {
    double fixed;        // model state + gathered + logits: no free coefficient
    double activations;  // at activation factor 1
    double peak;
    double weight = 1;
  };
  // Proxy mode's model, strategies and their features.
  struct ProxyParts {
    ProxyMapping mapping;
    StepTimeFeaturizer features;  // of the proxy model, on topology_
    MemoryEstimator memory;
  };
  // Adds a SUCCEEDED trial's observations (no refit); true if it fed a half.
  bool AddMeasured(const ModelSpec& model, int seq_len, const Strategy& s,
                   const TrialMetrics& measured, double weight);
  void RefitTime();
  void RefitMemory();

  ModelSpec model_;
  int seq_len_;
  int global_batch_size_;
  DeviceSpec device_;
  LinkTopology topology_;             // from device_: where groups sit, what crossing nodes costs
  StepTimeFeaturizer features_;       // of model_ at seq_len_ on topology_
  MemoryEstimator memory_estimator_;  // of model_ at seq_len_
  TimeCoefficients time_prior_;
  TimeCoefficients time_;
  MemoryCoefficients memory_;
  std::vector<TimeObservation> time_observations_;
  std::vector<MemoryObservation> memory_observations_;
  // Out-of-memory trials: `peak` is the device's memory, a lower bound.
  std::vector<MemoryObservation> oom_observations_;
  std::shared_ptr<const ProxyParts> proxy_;  // null: trials run at full size
  double time_fit_error_ = 0;
  int observations_ = 0;
  int earlier_observations_ = 0;
  // When a half is refitted (kRefitGrowth): the job's own observations it
  // was fed, and their count at its last refit.
  struct RefitSchedule {
    int seen = 0;
    int refit_at = 0;
    // Counts one more; true when the half is to be refitted now.
    bool CountAndDue();
  };
  RefitSchedule time_schedule_;
  RefitSchedule memory_schedule_;
  uint64_t fits_ = 0;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_COST_MODEL_H_
