// Trial records (search/trial.h): the metrics' noise rule.
#include "gtest/gtest.h"
#include "search/trial.h"

namespace autoaccel {
namespace {

TEST(TrialMetrics, SpreadAboveTwentyPercentOfTheMedianIsNoisy) {
  TrialMetrics m;
  EXPECT_FALSE(m.IsNoisy());  // nothing measured
  m.step_time_median_s = 1.0;
  m.step_time_min_s = 0.95;
  m.step_time_max_s = 1.15;  // spread 0.20: not more than 20%
  EXPECT_FALSE(m.IsNoisy());
  EXPECT_EQ(TrialMetricsToJson(m)["noisy"], false);
  m.step_time_max_s = 1.3;  // spread 0.35
  EXPECT_TRUE(m.IsNoisy());
  EXPECT_EQ(TrialMetricsToJson(m)["noisy"], true);
  // The flag is derived, so reading the JSON back gives the same answer.
  EXPECT_TRUE(TrialMetricsFromJson(TrialMetricsToJson(m))->IsNoisy());
  // Measured over many steps, the middle 80% decides: one slow step among
  // hundreds (max far out) is not noise, a wide middle is.
  m.step_time_max_s = 3.0;
  m.step_time_spread = 0.08;
  EXPECT_FALSE(m.IsNoisy());
  EXPECT_FALSE(TrialMetricsFromJson(TrialMetricsToJson(m))->IsNoisy());
  m.step_time_spread = 0.25;
  EXPECT_TRUE(m.IsNoisy());
}

}  // namespace
}  // namespace autoaccel
