#include "search/proxy_extrapolation.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace autoaccel {

absl::StatusOr<Extrapolation> Extrapolate(const CostModel& model, const Strategy& full,
                                          const TrialMetrics& measured) {
  const ProxyMapping* mapping = model.proxy();
  if (mapping == nullptr) {
    return absl::FailedPreconditionError("extrapolation needs a cost model in proxy mode");
  }
  absl::StatusOr<ProxyTrial> trial = mapping->TrialOf(full);
  if (!trial.ok()) return trial.status();
  if (!(measured.step_time_median_s > 0) || !std::isfinite(measured.step_time_median_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the proxy trial of ", StrategyToText(full), " measured no step time"));
  }
  const CostModel::Prediction proxy = model.PredictProxy(*trial);
  const CostModel::Prediction target = model.Predict(full);
  if (!(proxy.step_time_s > 0) || !(target.step_time_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cost model predicts no step time for ", StrategyToText(full)));
  }
  Extrapolation e;
  e.proxy_strategy = trial->strategy;
  e.proxy = mapping->Describe();
  e.model_ratio = target.step_time_s / proxy.step_time_s;

  const double m = measured.step_time_spread / 2;
  const double u = std::max(model.time_fit_error(), kUnvalidatedModelError);
  const double changed = std::abs(target.step_time_s - proxy.step_time_s) /
                         std::max(target.step_time_s, proxy.step_time_s);
  e.relative_uncertainty = std::sqrt(m * m + (u * changed) * (u * changed));

  const TrainingSetup& setup = mapping->full();
  TrialMetrics& out = e.metrics;
  out.measured_steps = measured.measured_steps;
  out.step_time_median_s = measured.step_time_median_s * e.model_ratio;
  out.step_time_min_s = measured.step_time_min_s * e.model_ratio;
  out.step_time_max_s = measured.step_time_max_s * e.model_ratio;
  out.step_time_spread = measured.step_time_spread;
  out.final_loss = measured.final_loss;
  out.skipped_steps = measured.skipped_steps;
  const double tokens = double(setup.global_batch_size) * setup.seq_len;
  out.tokens_per_second = tokens / out.step_time_median_s;
  out.samples_per_second = double(setup.global_batch_size) / out.step_time_median_s;
  out.achieved_tflops =
      setup.model.TrainingFlopsPerToken(setup.seq_len) * tokens / out.step_time_median_s / 1e12;
  if (measured.peak_tflops > 0) {
    out.peak_tflops = measured.peak_tflops / mapping->shape().world_size * setup.world_size;
    out.mfu = out.achieved_tflops / out.peak_tflops;
  }
  if (measured.peak_memory_bytes > 0) {
    out.peak_memory_bytes = std::max<int64_t>(
        0, measured.peak_memory_bytes + target.memory.total() - proxy.memory.total());
  }
  e.step_time_low_s = out.step_time_median_s / (1 + e.relative_uncertainty);
  e.step_time_high_s = out.step_time_median_s * (1 + e.relative_uncertainty);
  return e;
}

}  // namespace autoaccel
