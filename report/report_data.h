// The figures the HTML job report plots, computed from the job's trials:
// the throughput/memory Pareto front, the best result over time, predicted
// against measured, the effect of each strategy dimension, and the memory
// of the devices that ran the job. Pure functions of the messages given
// (no I/O, no RPCs); any thread.
#ifndef AUTOACCEL_REPORT_REPORT_DATA_H_
#define AUTOACCEL_REPORT_REPORT_DATA_H_

#include <cstdint>
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

// The best tokens/s measured by each moment of the job: one entry per
// SUCCEEDED trial that raised it, by finish time; `seconds` counts from the
// job's start (its creation when it never started).
struct BestSoFarPoint {
  double seconds = 0;
  double tokens_per_second = 0;
  int trial_index = 0;
  std::string strategy;
};
std::vector<BestSoFarPoint> BestSoFar(const v1::Job& job, const std::vector<v1::Trial>& trials);
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
  std::string value;                    // the canonical text's spelling ("bf16", "4", "1")
  int trials = 0;                       // trials run with it
  int succeeded = 0;                    // of which measured
  int out_of_memory = 0;                // of which OOM
  double best_tokens_per_second = 0;    // 0 when none succeeded
  double median_tokens_per_second = 0;  // over the succeeded
};
struct DimensionEffect {
  std::string dimension;            // the strategy field's name ("precision")
  std::vector<ValueEffect> values;  // in the dimension's own order (numbers ascending)
};
// One entry per row of kStrategyFields (search/strategy_fields.h), in the
// table's order, so a new dimension appears without a change here. Trials
// whose strategy does not convert are left out.
std::vector<DimensionEffect> DimensionEffects(const std::vector<v1::Trial>& trials);

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
