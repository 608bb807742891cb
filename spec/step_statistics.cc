#include "spec/step_statistics.h"

#include <algorithm>

namespace autoaccel {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

void SetStepTimeFigures(const std::vector<double>& times, TrialMetrics* m) {
  if (times.empty()) return;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const auto at = [&](double q) {
    return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5)];
  };
  m->measured_steps = static_cast<int>(times.size());
  m->step_time_median_s = Median(times);
  m->step_time_min_s = sorted.front();
  m->step_time_max_s = sorted.back();
  if (m->step_time_median_s > 0) m->step_time_spread = (at(0.9) - at(0.1)) / m->step_time_median_s;
}

}  // namespace autoaccel
