// The exposition format as Prometheus reads it: escaping, values,
// cumulative histograms, and the coordinator's whole exposition checked by
// Prometheus's own promtool.
#include "common/prometheus_text.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/coordinator_metrics.h"
#include "tests/promtool.h"
#include "tests/subprocess.h"

namespace autoaccel {
namespace {

using ::autoaccel::testing::MakeTempDir;
using ::autoaccel::testing::Promtool;
using ::testing::HasSubstr;

TEST(PrometheusText, ValuesAreWrittenAsPrometheusParsesThem) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(42), "42");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(FormatMetricValue(1e-5), "1e-05");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");  // shortest text that reads back exactly
  EXPECT_EQ(FormatMetricValue(12345678901234.0), "12345678901234");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(PrometheusText, LabelValuesAndHelpAreEscaped) {
  PrometheusText out;
  out.Family("x_total", MetricType::kCounter, "a \\ b\nc \"d\"");
  out.Sample("x_total", {{"type", "a\"b\\c\nd"}}, 1);
  EXPECT_EQ(out.text(),
            "# HELP x_total a \\\\ b\\nc \"d\"\n"
            "# TYPE x_total counter\n"
            "x_total{type=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Histogram h({0.1, 1});
  h.Observe(0.05);
  h.Observe(0.1);  // "le": a value on a bound counts in that bucket
  h.Observe(0.5);
  h.Observe(7);
  PrometheusText out;
  out.Family("d_seconds", MetricType::kHistogram, "d");
  out.HistogramSamples("d_seconds", {{"k", "v"}}, h);
  EXPECT_EQ(out.text(),
            "# HELP d_seconds d\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{k=\"v\",le=\"0.1\"} 2\n"
            "d_seconds_bucket{k=\"v\",le=\"1\"} 3\n"
            "d_seconds_bucket{k=\"v\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{k=\"v\"} 7.65\n"
            "d_seconds_count{k=\"v\"} 4\n");
}

TEST(CoordinatorMetrics, PromtoolFindsNothingWrongWithTheExposition) {
  CoordinatorMetrics metrics;
  metrics.JobFinished(JobState::kSucceeded);
  metrics.TrialFinished(TrialStatus::kSucceeded, false);
  metrics.TrialFinished(TrialStatus::kFailed, true);
  metrics.TrialFinished(TrialStatus::kPruned, false);
  metrics.AttemptFailedOutsideStrategy();
  metrics.TrialDispatched(absl::Seconds(2));
  metrics.TrialRan(absl::Milliseconds(3500));
  metrics.StoreWrite(absl::Microseconds(800));
  SchedulerCensus scheduler;
  scheduler.unfinished_jobs[JobState::kRunning] = 2;
  scheduler.trials_running = 3;
  PoolCensus pool;
  pool.workers_healthy = 2;
  pool.devices["cpu"] = {1, 2, 0};
  pool.devices["cuda \"weird\"\nname"] = {0, 0, 4};  // a device type is the worker's word
  const std::string text = metrics.Render(scheduler, pool);

  std::string findings;
  EXPECT_EQ(Promtool(MakeTempDir("autoaccel-promtool-"), text, &findings), 0) << findings << "\n"
                                                                              << text;
  EXPECT_THAT(text, HasSubstr("autoaccel_jobs{state=\"RUNNING\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_jobs{state=\"QUEUED\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_jobs_finished_total{state=\"SUCCEEDED\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "autoaccel_trials_finished_total{status=\"FAILED\",outcome=\"infrastructure\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("autoaccel_trials_finished_total{status=\"FAILED\",outcome=\"measured\"} 0\n"));
  EXPECT_THAT(
      text, HasSubstr("autoaccel_trials_finished_total{status=\"PRUNED\",outcome=\"pruned\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_trial_attempts_failed_outside_strategy_total 1\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_dispatch_wait_seconds_bucket{le=\"5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_trial_duration_seconds_sum 3.5\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_store_write_seconds_bucket{le=\"0.001\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_workers{state=\"healthy\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_devices{type=\"cpu\",state=\"held\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("autoaccel_trials_running 3\n"));
}

TEST(CoordinatorMetrics, DeviceTypesWorkersMakeUpCreateABoundedNumberOfSeries) {
  CoordinatorMetrics metrics;
  PoolCensus pool;
  pool.devices["cpu"] = {100, 0, 0};
  for (int i = 0; i < 1000; ++i) pool.devices[absl::StrCat("made-up-", i)] = {1, 0, 0};
  const std::string text = metrics.Render(SchedulerCensus(), pool);
  int series = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    series += absl::StartsWith(line, "autoaccel_devices{") ? 1 : 0;
  }
  EXPECT_EQ(series, 3 * kMaxDeviceTypeSeries);
  EXPECT_THAT(text, HasSubstr("autoaccel_devices{type=\"cpu\",state=\"free\"} 100\n"));
  // cpu and 14 of the 1000 types of one device each kept (by name, as they
  // tie), the other 986 summed.
  EXPECT_THAT(text, HasSubstr("autoaccel_devices{type=\"other\",state=\"free\"} 986\n"));
}

// The check above can fail: promtool rejects what Prometheus would not read.
TEST(CoordinatorMetrics, PromtoolRejectsABrokenExposition) {
  std::string findings;
  EXPECT_NE(Promtool(MakeTempDir("autoaccel-promtool-"),
                     "# TYPE x counter\nx{a=\"unterminated} 1\n", &findings),
            0)
      << findings;
}

}  // namespace
}  // namespace autoaccel
