// The figures the HTML job report plots, computed from the job's trials:
// the throughput/memory Pareto front, the best result over time, predicted
// against measured, the effect of each strategy dimension, and the memory
// of the devices that ran the job. Pure functions of the messages given
// (no I/O, no RPCs); any thread.
#ifndef AUTOACCEL_REPORT_REPORT_DATA_H_
#define AUTOACCEL_REPORT_REPORT_DATA_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/autoaccel.pb.h"

namespace autoaccel {

// One measured trial: tokens/s against peak memory per device.
struct ThroughputPoint {
  double peak_memory_bytes = 0;
  double tokens_per_second = 0;
  int trial_index = 0;
  std::string strategy;
};

// The SUCCEEDED trials with a throughput and a peak memory, in proposal
// order.
std::vector<ThroughputPoint> MeasuredPoints(const std::vector<v1::Trial>& trials);

// The points no other point beats on both axes (at most as much memory and
// at least as many tokens/s, one of them strictly), by memory ascending (and
// so by tokens/s ascending). Equal points keep the first.
std::vector<ThroughputPoint> ParetoFront(const std::vector<ThroughputPoint>& points);

// The best strategy found by each moment of the job, by the same figures
// as the answer (server/settle.h): each of the job's standings enters when
// its first measurement finished, with its figure (the mean of its kept
// measurements); one entry per strategy that raised the best, by that time.
// A job without standings (stored before they were sent) steps on single
// measurements instead. `seconds` counts from the job's start (its creation
// when it never started); `trial_index` is the strategy's first trial.
struct BestSoFarPoint {
  double seconds = 0;
  double tokens_per_second = 0;
  int trial_index = 0;
  std::string strategy;
};
std::vector<BestSoFarPoint> BestSoFar(const v1::Job& job, const std::vector<v1::Trial>& trials);

// The standing of each trial's strategy, by Trial.index (a strategy's
// repeats share its standing); trials of no standing are absent. Points
// into `job`.
std::map<int, const v1::StrategyStanding*> StandingsByTrial(const v1::Job& job);

// The job's answer among its standings; nullptr when it has none.
const v1::StrategyStanding* AnswerStanding(const v1::Job& job);

// The fastest single measurement that is faster than the answer's figure
// but is not the answer's strategy: a measurement the answer's rule did not
// take (measured once and not repeated, its repeats disagreed or averaged
// lower, or it lost a tie to a simpler strategy). nullptr when none.
const v1::Trial* FasterUnconfirmed(const v1::Job& job, const std::vector<v1::Trial>& trials);
// Seconds from the job's start to a trial's finish (0 if it never finished).
double SecondsIntoJob(const v1::Job& job, const v1::Trial& t);

// A SUCCEEDED trial that carries the cost model's prediction.
struct PredictedMeasured {
  int trial_index = 0;
  std::string strategy;
  double predicted_step_s = 0, measured_step_s = 0;
  double predicted_peak_bytes = 0, measured_peak_bytes = 0;
};
std::vector<PredictedMeasured> PredictionPairs(const std::vector<v1::Trial>& trials);
// The median of |predicted - measured| / measured over pairs whose measured
// value is > 0; 0 when there is none. `step` picks step time, else memory.
double MedianRelativeError(const std::vector<PredictedMeasured>& pairs, bool step);

// One value of one strategy dimension across the job's trials (confirmation
// repeats and PRUNED candidates left out).
struct ValueEffect {
  std::string value;      // the canonical text's spelling ("bf16", "4", "1")
  int trials = 0;         // trials run with it
  int succeeded = 0;      // of which measured
  int out_of_memory = 0;  // of which OOM
  // The best figure of a strategy with this value by the answer's rules
  // (its standing's: the mean of its kept measurements); 0 when none
  // succeeded. Without standings, the best single measurement.
  double best_tokens_per_second = 0;
  double median_tokens_per_second = 0;  // over the succeeded measurements
  bool answer = false;                  // the answer's value
};
struct DimensionEffect {
  std::string dimension;            // the strategy field's name ("precision")
  std::vector<ValueEffect> values;  // in the dimension's own order (numbers ascending)
};
// One entry per row of kStrategyFields (spec/strategy_fields.h), in the
// table's order, so a new dimension appears without a change here. Trials
// whose strategy does not convert are left out.
std::vector<DimensionEffect> DimensionEffects(const v1::Job& job,
                                              const std::vector<v1::Trial>& trials);

// The memory of one device that ran the job's trials, for the report's
// memory line: the smallest memory among the devices of the job's device
// type on the workers its trials ran on (the limit a strategy must fit).
struct DeviceMemory {
  int64_t bytes = 0;  // 0 = unknown
  std::string note;   // where the figure comes from, or why there is none
};
DeviceMemory JobDeviceMemory(const v1::ListWorkersResponse& workers,
                             const std::vector<v1::Trial>& trials, const std::string& device_type);

}  // namespace autoaccel

#endif  // AUTOACCEL_REPORT_REPORT_DATA_H_
