// How sure a job is of its answer (server/settle.h) and the answer chosen by
// those rules (server/answer.h): scripted measurements, settled, tied and
// provisional.
#include "server/settle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "server/answer.h"

namespace autoaccel {
namespace {

using ::testing::ElementsAre;

constexpr double kTolerance = 0.05;

// Strategies that differ in how much they switch on.
const char kPlain[] =
    "mbs=4,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
const char kRecompute[] =
    "mbs=8,ga=1,precision=bf16,checkpoint=selective,attention=sdpa,optimizer=adamw,offload=none";
const char kSharded[] =
    "dp=2,tp=1,pp=1,sharding=zero2,mbs=4,ga=1,precision=bf16,checkpoint=selective,"
    "attention=sdpa,optimizer=adamw,offload=none";

// A job's trials, in proposal order: each strategy's first measurement and
// its repeats (confirmation trials).
class Trials {
 public:
  // A search trial of `strategy` at `tps` tokens/s; returns its id.
  std::string First(const std::string& strategy, double tps, int64_t peak = 100) {
    return Add(strategy, tps, "", peak);
  }
  // A repeat of trial `of`'s strategy.
  void Repeat(const std::string& of, double tps) {
    for (const TrialRecord& t : trials_) {
      if (t.trial_id == of) {
        Add(t.strategy_text, tps, of, t.metrics.peak_memory_bytes);
        return;
      }
    }
    ADD_FAILURE() << "no trial " << of;
  }
  const std::vector<TrialRecord>& records() const { return trials_; }

 private:
  std::string Add(const std::string& strategy, double tps, const std::string& confirms,
                  int64_t peak) {
    TrialRecord t;
    t.index = static_cast<int>(trials_.size());
    t.trial_id = "t" + std::to_string(t.index);
    t.strategy_text = strategy;
    t.status = TrialStatus::kSucceeded;
    t.metrics.tokens_per_second = tps;
    t.metrics.step_time_median_s = 1;
    t.metrics.step_time_min_s = 0.98;
    t.metrics.step_time_max_s = 1.02;
    t.metrics.peak_memory_bytes = peak;
    t.confirms = confirms;
    trials_.push_back(t);
    return t.trial_id;
  }
  std::vector<TrialRecord> trials_;
};

TEST(SettleTest, TheIntervalIsAStudentTIntervalOverTheMeasurements) {
  // Two measurements 1000 and 1020: mean 1010, s = 14.14, t(0.975, 1) = 12.706.
  ThroughputInterval i = IntervalOf({1000, 1020}, kTolerance);
  EXPECT_DOUBLE_EQ(i.mean, 1010);
  EXPECT_NEAR(i.high - i.mean, 12.706 * 14.1421356 / std::sqrt(2.0), 1e-3);
  EXPECT_NEAR(i.mean - i.low, i.high - i.mean, 1e-9);
  // Measured once: the tolerance stands for the unknown spread.
  i = IntervalOf({1000}, kTolerance);
  EXPECT_DOUBLE_EQ(i.low, 950);
  EXPECT_DOUBLE_EQ(i.high, 1050);
}

TEST(SettleTest, OfThreeOrMoreTheOneFarthestFromTheMedianIsSetAside) {
  EXPECT_THAT(KeptMeasurements({1000, 3500, 1010}), ElementsAre(1000, 1010));
  EXPECT_THAT(KeptMeasurements({1000, 1010}), ElementsAre(1000, 1010));
}

TEST(SettleTest, AgreeingRepeatsFarFromEveryRivalSettle) {
  Trials t;
  const std::string fast = t.First(kSharded, 2000);
  const std::string slow = t.First(kPlain, 1000);
  t.Repeat(fast, 1997);  // trial t2
  t.Repeat(fast, 2010);  // the farthest from the median: set aside
  t.Repeat(slow, 1005);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kSettled);
  ASSERT_NE(s.Answer(), nullptr);
  EXPECT_EQ(s.Answer()->strategy_text, kSharded);
  EXPECT_TRUE(s.measure_again.empty());
  const Answer a = ChooseAnswer(t.records(), 0, kTolerance);
  EXPECT_TRUE(a.confirmed);
  EXPECT_EQ(a.measurements, 3);
  EXPECT_DOUBLE_EQ(a.figure, 1998.5);
  EXPECT_NEAR(a.spread, 3.0 / 1997.0, 1e-12);
  // The kept measurements are equally close to their mean: the later answers.
  EXPECT_EQ(a.trial_id, "t2");
  EXPECT_DOUBLE_EQ(a.first_tokens_per_second, 2000);
}

TEST(SettleTest, RepeatsThatDisagreeAreProvisionalAndMeasuredAgain) {
  // The case of a busy machine: 12371 tokens/s once, 3504 the other time.
  Trials t;
  const std::string first = t.First(kSharded, 12371);
  t.Repeat(first, 3504);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kProvisional);
  EXPECT_THAT(s.measure_again, ElementsAre(kSharded));
  const Answer a = ChooseAnswer(t.records(), 0, kTolerance);
  EXPECT_FALSE(a.confirmed) << "never confirmed while its repeats disagree";
  EXPECT_EQ(a.certainty, Certainty::kProvisional);
  EXPECT_NEAR(a.spread, (12371.0 - 3504.0) / 3504.0, 1e-9);
}

TEST(SettleTest, FiveRunsThatSpreadWiderThanTheToleranceStillAgreeWhenTheyPinTheMeanDown) {
  // A demo on this 2-core machine: the four kept runs (3100 is set aside)
  // differ by 6%, but put the mean within ±4% of its figure.
  Trials t;
  const std::string first = t.First(kPlain, 2858);
  for (double tps : {2790.0, 2700.0, 3100.0, 2810.0}) t.Repeat(first, tps);
  Standings s = Settle(t.records(), 0, kTolerance);
  ASSERT_EQ(s.ranked.size(), 1u);
  EXPECT_GT(s.ranked[0].spread, kTolerance);
  EXPECT_TRUE(s.ranked[0].agrees);
  EXPECT_EQ(s.certainty, Certainty::kSettled);
  // Two runs as far apart are not enough: the interval of two is wide.
  Trials two;
  two.Repeat(two.First(kPlain, 2858), 2700);
  EXPECT_EQ(Settle(two.records(), 0, kTolerance).certainty, Certainty::kProvisional);
}

TEST(SettleTest, AThirdMeasurementSetsAnOutlierAsideAndSettles) {
  Trials t;
  const std::string first = t.First(kPlain, 12371);  // the outlier
  t.Repeat(first, 3504);
  t.Repeat(first, 3520);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kSettled);
  EXPECT_NEAR(s.Answer()->figure, 3512, 1e-9);
  EXPECT_TRUE(ChooseAnswer(t.records(), 0, kTolerance).confirmed);
}

TEST(SettleTest, OverlappingIntervalsAreATieAnsweredByTheSimplestStrategy) {
  // ZeRO-2 with recompute leads by 1% over the plain strategy: within noise.
  Trials t;
  const std::string sharded = t.First(kSharded, 13449, /*peak=*/50);
  const std::string plain = t.First(kPlain, 13320, /*peak=*/70);
  t.Repeat(sharded, 13300);
  t.Repeat(plain, 13250);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kTie);
  EXPECT_EQ(s.ranked.front().strategy_text, kSharded) << "the leader by figure";
  EXPECT_THAT(s.tie, ElementsAre(kSharded, kPlain));
  ASSERT_NE(s.Answer(), nullptr);
  EXPECT_EQ(s.Answer()->strategy_text, kPlain)
      << "fewer sharded/recomputed/offloaded dimensions, though it needs more memory";
  // Both may be measured again (fewer than kMaxMeasurements each).
  EXPECT_THAT(s.measure_again, ElementsAre(kSharded, kPlain));
  const Answer a = ChooseAnswer(t.records(), 0, kTolerance);
  EXPECT_EQ(a.certainty, Certainty::kTie);
  EXPECT_TRUE(a.confirmed) << "its own repeats agree";
  ASSERT_EQ(a.tied_with.size(), 1u);
  EXPECT_EQ(a.tied_with[0].first, kSharded);
}

TEST(SettleTest, BetweenEquallySimpleStrategiesTheLowerPeakMemoryAnswersATie) {
  Trials t;
  const std::string big = t.First(kRecompute, 1000, /*peak=*/900);
  const std::string small = t.First(
      "mbs=2,ga=2,precision=bf16,checkpoint=selective,attention=sdpa,optimizer=adamw,"
      "offload=none",
      995, /*peak=*/400);
  t.Repeat(big, 1001);
  t.Repeat(small, 996);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kTie);
  EXPECT_EQ(s.Answer()->peak_memory_bytes, 400);
}

TEST(SettleTest, MoreMeasurementsNarrowTheIntervalsUntilTheyPart) {
  // 1.5% apart, each steady within 0.2%: two measurements each overlap,
  // five each do not.
  Trials t;
  const std::string a = t.First(kSharded, 1015);
  const std::string b = t.First(kPlain, 1000);
  t.Repeat(a, 1017);
  t.Repeat(b, 1002);
  EXPECT_EQ(Settle(t.records(), 0, kTolerance).certainty, Certainty::kTie);
  for (double v : {1016.0, 1014.0, 1015.5}) t.Repeat(a, v);
  for (double v : {1001.0, 999.0, 1000.5}) t.Repeat(b, v);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kSettled);
  EXPECT_EQ(s.Answer()->strategy_text, kSharded);
}

TEST(SettleTest, ARivalWhoseMeasurementsDisagreeNeverAnswersATie) {
  Trials t;
  const std::string steady = t.First(kSharded, 66000);
  const std::string outlier = t.First(kPlain, 97000);  // simpler, but 97000 then 14000
  t.Repeat(steady, 65000);
  t.Repeat(outlier, 14000);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kTie) << "its interval is too wide to rule it out";
  EXPECT_EQ(s.Answer()->strategy_text, kSharded);
  EXPECT_THAT(s.measure_again, ElementsAre(kSharded, kPlain));
  // Measured a third time, the outlier is set aside and the two part.
  t.Repeat(outlier, 14200);
  t.Repeat(steady, 65200);
  EXPECT_EQ(Settle(t.records(), 0, kTolerance).certainty, Certainty::kSettled);
}

TEST(SettleTest, AStrategyMeasuredTheMostTimesIsNotMeasuredAgain) {
  Trials t;
  const std::string a = t.First(kSharded, 1000);
  const std::string b = t.First(kPlain, 1000);
  for (int i = 1; i < kMaxMeasurements; ++i) {
    t.Repeat(a, 1000 + (i % 2 ? 10 : -10));
    t.Repeat(b, 1000 + (i % 2 ? -10 : 10));
  }
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kTie) << "an honest tie";
  EXPECT_TRUE(s.measure_again.empty());
  EXPECT_EQ(s.Answer()->strategy_text, kPlain);
}

TEST(SettleTest, AStrategyMeasuredOnceIsNotTheLeaderOverRepeatedOnes) {
  Trials t;
  const std::string repeated = t.First(kPlain, 1000);
  t.First(kSharded, 1500);  // measured once, not repeated
  t.Repeat(repeated, 1002);
  const Standings s = Settle(t.records(), 0, kTolerance);
  EXPECT_EQ(s.ranked.front().strategy_text, kPlain);
  EXPECT_EQ(s.certainty, Certainty::kSettled) << "1500 +- 5% does not reach 1000-1002";
}

TEST(SettleTest, AStrategyMeasuredOnceAndNoisyCannotAnswer) {
  Trials t;
  t.First(kPlain, 1000);
  TrialRecord noisy = t.records().front();
  noisy.metrics.step_time_min_s = 0.5;
  noisy.metrics.step_time_max_s = 2.0;
  const Standings s = Settle({noisy}, 0, kTolerance);
  EXPECT_EQ(s.certainty, Certainty::kNone);
  EXPECT_EQ(s.Answer(), nullptr);
  EXPECT_EQ(ChooseAnswer({noisy}, 0, kTolerance).trial_id, "");
}

}  // namespace
}  // namespace autoaccel
