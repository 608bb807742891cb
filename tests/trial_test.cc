// Trial records (spec/trial.h): the metrics' noise rule, and the metrics'
// field table (spec/trial_metrics_fields.h) through the JSON form.
#include "spec/trial.h"

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spec/trial_metrics_fields.h"
#include "tests/search_test_util.h"

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

TEST(TrialMetrics, EveryFieldRoundTripsThroughJsonUnderItsKey) {
  const TrialMetrics m = EveryMetricSet();
  const nlohmann::json j = TrialMetricsToJson(m);
  std::set<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.insert(key);
  ForEachRow(kTrialMetricsFields, [&](const auto& field) {
    EXPECT_EQ(j.at(std::string(field.name)), nlohmann::json(m.*field.member)) << field.name;
    EXPECT_EQ(keys.erase(std::string(field.name)), 1u) << field.name;
  });
  EXPECT_EQ(keys, std::set<std::string>{"noisy"});  // the one derived key
  absl::StatusOr<TrialMetrics> back = TrialMetricsFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameMetrics(*back, m);
  // Each field alone, the others missing (they read as zero).
  ForEachRow(kTrialMetricsFields, [&](const auto& field) {
    const nlohmann::json one = {{std::string(field.name), j.at(std::string(field.name))}};
    absl::StatusOr<TrialMetrics> read = TrialMetricsFromJson(one);
    ASSERT_TRUE(read.ok()) << read.status();
    TrialMetrics expected;
    expected.*field.member = m.*field.member;
    ExpectSameMetrics(*read, expected);
  });
}

TEST(TrialMetrics, AFieldOfTheWrongTypeIsNamed) {
  ForEachRow(kTrialMetricsFields, [](const auto& field) {
    const nlohmann::json bad = {{std::string(field.name), "x"}};
    const absl::Status status = TrialMetricsFromJson(bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field.name;
    EXPECT_EQ(std::string(status.message()).rfind(absl::StrCat("metrics.", field.name, ": "), 0),
              0u)
        << status;
  });
}

}  // namespace
}  // namespace autoaccel
