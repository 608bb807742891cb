// What a rank's answer means for its trial, and where rendezvous ports come
// from: the pure rules behind the coordinator's retries.
#include "server/rank_outcome.h"

#include <limits>
#include <type_traits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "search/searcher.h"
#include "server/measurement_check.h"
#include "server/rendezvous_ports.h"
#include "spec/field_table.h"
#include "spec/trial_metrics_fields.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

v1::RunTrialResponse Answer(TrialStatus status, bool infrastructure = false) {
  v1::RunTrialResponse r;
  r.set_status(ToProto(status));
  r.set_reason("why");
  r.set_infrastructure(infrastructure);
  return r;
}

TEST(RankOutcomeTest, TheWorkersVerdictStandsAndAnUnreachableWorkerIsInfrastructure) {
  RankOutcome oom = RankOutcomeOf(absl::OkStatus(), Answer(TrialStatus::kOom));
  EXPECT_EQ(oom.status, TrialStatus::kOom);
  EXPECT_FALSE(oom.infrastructure);
  EXPECT_EQ(oom.reason, "why");
  EXPECT_TRUE(RankOutcomeOf(absl::OkStatus(), Answer(TrialStatus::kFailed, true)).infrastructure);
  EXPECT_FALSE(RankOutcomeOf(absl::OkStatus(), Answer(TrialStatus::kFailed, false)).infrastructure);
  // Only a failure can be the infrastructure's.
  EXPECT_FALSE(RankOutcomeOf(absl::OkStatus(), Answer(TrialStatus::kOom, true)).infrastructure);
  // A status this build does not know (or none) is the worker's failure.
  v1::RunTrialResponse weird;
  weird.set_status(static_cast<v1::TrialStatus>(99));
  EXPECT_EQ(RankOutcomeOf(absl::OkStatus(), weird).status, TrialStatus::kFailed);
  EXPECT_THAT(RankOutcomeOf(absl::OkStatus(), weird).reason, HasSubstr("unknown status: 99"));
  EXPECT_EQ(RankOutcomeOf(absl::OkStatus(), v1::RunTrialResponse()).status, TrialStatus::kFailed);

  for (const absl::Status& s : {absl::UnavailableError("connection refused"),
                                absl::InternalError("stream reset"), absl::CancelledError("x")}) {
    RankOutcome o = RankOutcomeOf(s, v1::RunTrialResponse());
    EXPECT_EQ(o.status, TrialStatus::kFailed) << s;
    EXPECT_TRUE(o.infrastructure) << s;
  }
  EXPECT_EQ(RankOutcomeOf(absl::DeadlineExceededError(""), {}).status, TrialStatus::kTimeout);
  RankOutcome refused = RankOutcomeOf(absl::InvalidArgumentError("trial_id: bad"), {});
  EXPECT_EQ(refused.status, TrialStatus::kFailed);
  EXPECT_FALSE(refused.infrastructure) << "a retry would be refused the same way";
}

TEST(MeasurementCheckTest, ImpossibleFiguresAreCaughtWhateverPeakTheWorkerClaims) {
  TrialMetrics m;
  m.tokens_per_second = 5000;
  m.step_time_median_s = m.step_time_min_s = m.step_time_max_s = 0.1;
  const MeasurementLimits unknown_device{6e6, 1};
  EXPECT_EQ(ImpossibleMeasurement(m, unknown_device), "");
  TrialMetrics liar = m;
  liar.tokens_per_second = 1e12;  // 6e18 FLOP/s on one device
  EXPECT_THAT(ImpossibleMeasurement(liar, unknown_device), HasSubstr("impossible measurement"));
  EXPECT_EQ(ImpossibleMeasurement(liar, unknown_device, /*carries_throughput=*/false), "")
      << "only rank 0 speaks for the gang's throughput";
  TrialMetrics negative = m;
  negative.step_time_median_s = -1;
  EXPECT_NE(ImpossibleMeasurement(negative, unknown_device), "");
  TrialMetrics nan = m;
  nan.mfu = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(ImpossibleMeasurement(nan, unknown_device), "");
  TrialMetrics no_memory = m;
  no_memory.peak_memory_bytes = -1;
  EXPECT_THAT(ImpossibleMeasurement(no_memory, unknown_device), HasSubstr("negative memory"));
  // Every row of the metrics table is judged: each figure negative or not a
  // number, each byte count negative (the loss is the model's own).
  ForEachRow(kTrialMetricsFields, [&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::Value;
    TrialMetrics bad = m;
    if constexpr (std::is_same_v<T, double>) {
      if (field.name == "final_loss") return;
      bad.*field.member = -1;
      EXPECT_THAT(ImpossibleMeasurement(bad, unknown_device), HasSubstr("not a finite number"))
          << field.name;
      bad.*field.member = std::numeric_limits<double>::infinity();
      EXPECT_NE(ImpossibleMeasurement(bad, unknown_device), "") << field.name;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      bad.*field.member = -1;
      EXPECT_THAT(ImpossibleMeasurement(bad, unknown_device), HasSubstr("negative memory"))
          << field.name;
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      bad.*field.member = {1 << 20, -1};
      EXPECT_THAT(ImpossibleMeasurement(bad, unknown_device), HasSubstr("negative memory"))
          << field.name;
    }
  });
}

// Against the device the coordinator knows: its registered (or catalog)
// peak, its memory, and the weights the strategy must hold there.
TEST(MeasurementCheckTest, FiguresBeyondTheDeviceOrBelowTheWeightsAreImpossible) {
  MeasurementLimits limits;
  limits.flops_per_token = 6e6;  // a 1M-parameter model
  limits.ranks = 2;
  limits.device_peak_flops = 1e12;  // 1 TFLOP/s per device
  limits.device_memory_bytes = int64_t{8} << 30;
  limits.weight_bytes = int64_t{1} << 30;
  TrialMetrics m;
  m.tokens_per_second = 3e5;  // 0.9 TFLOP/s per device: 90% of the peak
  m.peak_memory_bytes = int64_t{2} << 30;
  EXPECT_EQ(ImpossibleMeasurement(m, limits), "");
  // A peak the worker registered itself (a probe may under-measure it):
  // only a gross excess is proof.
  TrialMetrics fast = m;
  fast.tokens_per_second = 1.2e6;  // 3.6x the peak
  EXPECT_EQ(ImpossibleMeasurement(fast, limits), "");
  fast.tokens_per_second = 1.5e6;  // 4.5x
  EXPECT_THAT(ImpossibleMeasurement(fast, limits), HasSubstr("the device's peak of 1 TFLOP/s"));
  // A datasheet's peak (the device catalog): 25% of margin.
  limits.peak_from_catalog = true;
  fast.tokens_per_second = 4.5e5;  // 135% of the peak
  EXPECT_THAT(ImpossibleMeasurement(fast, limits), HasSubstr("the device's peak of 1 TFLOP/s"));
  fast.tokens_per_second = 4e5;  // 120%: within the margin
  EXPECT_EQ(ImpossibleMeasurement(fast, limits), "");
  TrialMetrics big = m;
  big.peak_memory_bytes = int64_t{11} << 30;
  EXPECT_THAT(ImpossibleMeasurement(big, limits),
              HasSubstr("a peak of 11 GiB on a device of 8 GiB"));
  TrialMetrics small = m;
  small.peak_memory_bytes = int64_t{256} << 20;
  EXPECT_THAT(ImpossibleMeasurement(small, limits), HasSubstr("less than the 1 GiB of weights"));
  small.peak_memory_bytes = 0;  // not measured (a launcher's script may not say)
  EXPECT_EQ(ImpossibleMeasurement(small, limits), "");
}

TEST(MeasurementCheckTest, OfTwoWorkersFarApartTheFasterClaimIsDistrusted) {
  EXPECT_EQ(DistrustedOfPair(1000, 0, 1200, 0), 0);
  EXPECT_EQ(DistrustedOfPair(1000, 0, 1.2e7, 0), 2);
  EXPECT_EQ(DistrustedOfPair(1.2e7, 0, 1000, 0), 1);
  // A faster device is faster: per unit of peak they agree.
  EXPECT_EQ(DistrustedOfPair(1000, 1e12, 5000, 5e12), 0);
  EXPECT_EQ(DistrustedOfPair(1000, 1e12, 5000, 1e12), 2);
  EXPECT_EQ(DistrustedOfPair(5000, 1e12, 1000, 1e12), 1);
  // Two probes of one kind of machine, one taken on a busy host (a fifth of
  // the other): per unit of peak 5x apart, but the figures agree.
  EXPECT_EQ(DistrustedOfPair(1000, 2e11, 1100, 1e12), 0);
  EXPECT_EQ(DistrustedOfPair(1100, 1e12, 1000, 2e11), 0);
  // A forged figure stays apart whatever the peaks say.
  EXPECT_EQ(DistrustedOfPair(1000, 1e12, 1.2e7, 2e12), 2);
  EXPECT_EQ(DistrustedOfPair(0, 0, 5000, 0), 0) << "nothing measured: nothing to compare";
}

TEST(RankOutcomeTest, MfuAboveThePeakIsFlaggedAndNotEligibleAsTheAnswer) {
  TrialMetrics m;
  m.tokens_per_second = 100;
  m.peak_tflops = 1;
  m.mfu = 1.178;
  EXPECT_THAT(MfuAbovePeak(m), HasSubstr("117.8%"));
  ScoredTrial t{Strategy(), TrialStatus::kSucceeded, m};
  EXPECT_FALSE(IsEligible(t, 0));
  t.metrics.mfu = 0.9;
  EXPECT_EQ(MfuAbovePeak(t.metrics), "");
  EXPECT_TRUE(IsEligible(t, 0));
  t.metrics.peak_tflops = 0;  // unknown peak: nothing to compare with
  t.metrics.mfu = 0;
  EXPECT_TRUE(IsEligible(t, 0));
}

TEST(RendezvousPortsTest, WorkersOfOneHostShareItsPortsAndOtherHostsDoNot) {
  RendezvousPorts ports;
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_EQ(ports.Free("node1", 29500, 29501, now), 29500);
  ports.Acquire("node1", 29500, "t1/a1");
  // A second worker on node1 with the same range gets the next port.
  EXPECT_EQ(ports.Free("node1", 29500, 29999, now), 29501);
  EXPECT_EQ(ports.Free("node2", 29500, 29999, now), 29500);
  ports.Acquire("node1", 29501, "t2/a1");
  EXPECT_EQ(ports.Free("node1", 29500, 29501, now), 0);
  ports.Release("node1", 29500, "someone else");  // not the holder: nothing
  EXPECT_EQ(ports.HeldOn("node1"), 2);
  ports.Release("node1", 29500, "t1/a1");
  EXPECT_EQ(ports.Free("node1", 29500, 29501, now), 29500);
}

TEST(RendezvousPortsTest, AQuarantinedPortRestsUntilItsTimeIsUp) {
  RendezvousPorts ports;
  const absl::Time now = absl::FromUnixSeconds(1000);
  ports.Quarantine("node1", 29500, now + absl::Minutes(10));
  EXPECT_EQ(ports.Free("node1", 29500, 29999, now), 29501);
  EXPECT_EQ(ports.Free("node1", 29500, 29500, now), 0);
  EXPECT_EQ(ports.Free("node1", 29500, 29999, now + absl::Minutes(10)), 29500);
}

}  // namespace
}  // namespace autoaccel
