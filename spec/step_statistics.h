// Summaries of measured step times, shared by everyone who turns a list of
// timings into figures: the trial runner and the worker's launcher ranks
// (TrialMetrics' step-time fields), the coordinator's answer, the report,
// the replay benchmark. Pure functions; any thread.
#ifndef AUTOACCEL_SPEC_STEP_STATISTICS_H_
#define AUTOACCEL_SPEC_STEP_STATISTICS_H_

#include <vector>

#include "spec/trial.h"

namespace autoaccel {

// The median (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> values);

// Sets m's measured_steps, step_time_median_s, step_time_min_s,
// step_time_max_s and step_time_spread ((p90 - p10) / median, nearest
// rank) from the measured steps' `times`. Leaves m alone for none.
void SetStepTimeFigures(const std::vector<double>& times, TrialMetrics* m);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_STEP_STATISTICS_H_
