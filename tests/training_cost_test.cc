// Time and cost to train (common/training_cost.h): the user's token counts
// and deadlines, the arithmetic of days and cost with its band, and the
// choice of a cluster for a deadline or a budget.
#include "common/training_cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/status_matchers.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

TEST(TrainingCost, TokenCountsTakeDecimalSuffixes) {
  EXPECT_EQ(*ParseTokenCount("--tokens", "1T"), int64_t{1000000000000});
  EXPECT_EQ(*ParseTokenCount("--tokens", "300B"), int64_t{300000000000});
  EXPECT_EQ(*ParseTokenCount("--tokens", "2.5M"), int64_t{2500000});
  EXPECT_EQ(*ParseTokenCount("--tokens", "10k"), int64_t{10000});
  EXPECT_EQ(*ParseTokenCount("--tokens", "2.5e11"), int64_t{250000000000});
  for (const char* bad : {"", "T", "1X", "one", "-1T", "0", "0.5", "2e18"}) {
    EXPECT_THAT(ParseTokenCount("--tokens", bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tokens")))
        << bad;
  }
}

TEST(TrainingCost, DeadlinesAreDaysOrDurations) {
  EXPECT_EQ(*ParseDeadlineSeconds("--deadline", "30d"), 30 * 86400.0);
  EXPECT_EQ(*ParseDeadlineSeconds("--deadline", "1.5d"), 1.5 * 86400.0);
  EXPECT_EQ(*ParseDeadlineSeconds("--deadline", "12h"), 12 * 3600.0);
  EXPECT_EQ(*ParseDeadlineSeconds("--deadline", "90m"), 90 * 60.0);
  for (const char* bad : {"", "30", "d", "0d", "-1d", "0s", "soon"}) {
    EXPECT_THAT(ParseDeadlineSeconds("--deadline", bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--deadline")))
        << bad;
  }
}

// 1e6 tokens/s trains 86.4e9 tokens in one day; 64 devices at 2.5 an hour
// cost 24 x 2.5 x 64 = 3840 a day.
TEST(TrainingCost, DaysAndCostFollowFromTokensPerSecond) {
  const TrainingCost c = TrainingCostOf(1e6, int64_t{86400000000}, 64, 2.5);
  EXPECT_DOUBLE_EQ(c.days, 1.0);
  EXPECT_DOUBLE_EQ(c.days_fast, 1 - kStepTimeBand);
  EXPECT_DOUBLE_EQ(c.days_slow, 1 + kStepTimeBand);
  ASSERT_TRUE(c.priced);
  EXPECT_DOUBLE_EQ(c.cost, 3840);
  EXPECT_DOUBLE_EQ(c.cost_low, 3840 * (1 - kStepTimeBand));
  EXPECT_DOUBLE_EQ(c.cost_high, 3840 * (1 + kStepTimeBand));
  // Twice the devices at the same throughput: the same days, twice the cost.
  EXPECT_DOUBLE_EQ(TrainingCostOf(1e6, int64_t{86400000000}, 128, 2.5).cost, 7680);
  const TrainingCost unpriced = TrainingCostOf(2e6, int64_t{86400000000}, 64, 0);
  EXPECT_DOUBLE_EQ(unpriced.days, 0.5);
  EXPECT_FALSE(unpriced.priced);
  EXPECT_EQ(unpriced.cost, 0);
}

TEST(TrainingCost, MoneyIsWholeUnitsWithThousandsGrouped) {
  EXPECT_EQ(FormatMoney(0), "$0");
  EXPECT_EQ(FormatMoney(999.4), "$999");
  EXPECT_EQ(FormatMoney(1000), "$1,000");
  EXPECT_EQ(FormatMoney(644839.2), "$644,839");
  EXPECT_EQ(FormatMoney(1e9), "$1,000,000,000");
}

// Clusters by days at 1e6 tokens/s-days: cost follows days x devices.
std::vector<ClusterChoice> Clusters() {
  const int64_t day = 86400000000;  // tokens one day of 1e6 tokens/s trains
  return {
      {TrainingCostOf(1e6, 10 * day, 8, 1)},    // 10 days (slow 12.04), 1920
      {TrainingCostOf(1e6, 5 * day, 64, 1)},    // 5 days (slow 6.02), 7680
      {TrainingCostOf(1e6, 20 * day, 2, 1)},    // 20 days (slow 24.08), 960
      {std::nullopt},                           // no strategy
      {TrainingCostOf(1e6, 1 * day, 1024, 0)},  // 1 day, no price
  };
}

TEST(TrainingCost, ADeadlinePicksTheCheapestWhoseSlowEndMeetsIt) {
  EXPECT_EQ(CheapestMeetingDeadline(Clusters(), 30), 2u);
  EXPECT_EQ(CheapestMeetingDeadline(Clusters(), 15), 0u);
  // 10 days: the 10-day cluster's slow end (12.04) misses it.
  EXPECT_EQ(CheapestMeetingDeadline(Clusters(), 10), 1u);
  // Only the unpriced cluster is fast enough: nothing can be chosen.
  EXPECT_EQ(CheapestMeetingDeadline(Clusters(), 5), std::nullopt);
}

TEST(TrainingCost, ABudgetPicksTheFastestWhoseHighEndStaysWithinIt) {
  EXPECT_EQ(FastestWithinBudget(Clusters(), 10000), 1u);
  // 7680 x 1.204 = 9247 is over 9000.
  EXPECT_EQ(FastestWithinBudget(Clusters(), 9000), 0u);
  EXPECT_EQ(FastestWithinBudget(Clusters(), 1200), 2u);
  EXPECT_EQ(FastestWithinBudget(Clusters(), 1000), std::nullopt);
}

}  // namespace
}  // namespace autoaccel
