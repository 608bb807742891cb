// AddMetricsLine (worker/metrics_file.h): the JSON lines a launcher trial's
// script appends, one per input line. A bad line leaves the log unchanged;
// the rank's metrics of any log are finite.
#include <cmath>

#include "absl/strings/str_split.h"
#include "tests/fuzz/fuzz_check.h"
#include "worker/metrics_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  MetricsLog log;
  for (absl::string_view line : absl::StrSplit(fuzz::Text(data, size), '\n')) {
    const size_t steps = log.steps.size();
    const int lines = log.lines;
    const absl::Status added = AddMetricsLine(line, &log);
    if (!added.ok()) {
      FUZZ_CHECK(added.code() == absl::StatusCode::kInvalidArgument, added.ToString());
      FUZZ_CHECK(log.steps.size() == steps && log.lines == lines, added.ToString());
      break;
    }
  }
  for (const StepEvent& step : log.steps) {
    FUZZ_CHECK(step.step >= 1 && step.step_time_s > 0 && std::isfinite(step.step_time_s),
               std::to_string(step.step_time_s));
  }
  RankMetricsInput in;
  in.warmup_steps = 1;
  in.measured_steps = 5;
  in.world_size = 2;
  in.global_batch_size = 8;
  in.seq_len = 128;
  in.device_peak_tflops = 100;
  const TrialMetrics m = RankMetrics(log, in);
  const nlohmann::json j = TrialMetricsToJson(m);
  absl::StatusOr<TrialMetrics> again = TrialMetricsFromJson(nlohmann::json::parse(j.dump()));
  FUZZ_CHECK(again.ok() && TrialMetricsToJson(*again) == j, j.dump());
  return 0;
}
