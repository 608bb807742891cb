// The exhaustive searcher and the choice of the best trial (search/searcher.h),
// with a fake clock.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/failure_memory.h"
#include "search/searcher.h"
#include "search/space.h"
#include "spec/strategy.h"
#include "spec/trial.h"
#include "tests/search_test_util.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

std::vector<Strategy> SpaceOf(int global_batch_size) {
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(BaseRequest(global_batch_size));
  EXPECT_TRUE(space.ok()) << space.status();
  return space.value_or(std::vector<Strategy>{});
}

std::unique_ptr<Searcher> MustCreate(std::vector<Strategy> space, SearchBudget budget,
                                     const Clock* clock, int64_t memory_limit = 0) {
  absl::StatusOr<std::unique_ptr<Searcher>> s =
      CreateExhaustiveSearcher(std::move(space), budget, clock, memory_limit);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

ScoredTrial Trial(const Strategy& s, TrialStatus status, double tokens_per_second,
                  int64_t peak_memory_bytes) {
  ScoredTrial t;
  t.strategy = s;
  t.status = status;
  t.metrics.tokens_per_second = tokens_per_second;
  t.metrics.peak_memory_bytes = peak_memory_bytes;
  return t;
}

TEST(ExhaustiveSearcher, ProposesEveryStrategyOnceInOrderThenFinishes) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  std::unique_ptr<Searcher> searcher = MustCreate(space, SearchBudget{}, &clock);
  ASSERT_NE(searcher, nullptr);
  std::vector<Strategy> proposed;
  while (!searcher->Finished()) {
    std::optional<Proposal> next = searcher->Next();
    ASSERT_TRUE(next.has_value()) << "Next() empty before Finished()";
    proposed.push_back(next->strategy);
    ASSERT_LE(proposed.size(), space.size());
  }
  EXPECT_EQ(Texts(proposed), Texts(space));
  EXPECT_FALSE(searcher->Next().has_value());
  EXPECT_FALSE(searcher->Next().has_value());
  EXPECT_TRUE(searcher->Finished());
}

TEST(ExhaustiveSearcher, DuplicatesAreProposedOnce) {
  const Strategy a = MakeStrategy(2, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const Strategy b = MakeStrategy(1, 2, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  std::unique_ptr<Searcher> searcher = MustCreate({a, b, a, b, a}, SearchBudget{}, nullptr);
  ASSERT_NE(searcher, nullptr);
  std::vector<Strategy> proposed;
  while (std::optional<Proposal> next = searcher->Next()) proposed.push_back(next->strategy);
  EXPECT_THAT(proposed, ElementsAre(a, b));
  EXPECT_TRUE(searcher->Finished());
}

TEST(ExhaustiveSearcher, StopsAtMaxTrials) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  SearchBudget budget;
  budget.max_trials = 5;
  std::unique_ptr<Searcher> searcher = MustCreate(space, budget, &clock);
  ASSERT_NE(searcher, nullptr);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(searcher->Finished()) << i;
    std::optional<Proposal> next = searcher->Next();
    ASSERT_TRUE(next.has_value()) << i;
    EXPECT_EQ(next->strategy, space[i]);
  }
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());

  // A budget above the space size ends with the space.
  budget.max_trials = 1000;
  searcher = MustCreate(space, budget, &clock);
  ASSERT_NE(searcher, nullptr);
  size_t n = 0;
  while (searcher->Next()) ++n;
  EXPECT_EQ(n, space.size());
}

TEST(ExhaustiveSearcher, StopsAtTheDeadline) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  SearchBudget budget;
  budget.deadline = clock.Now() + absl::Minutes(10);
  std::unique_ptr<Searcher> searcher = MustCreate(space, budget, &clock);
  ASSERT_NE(searcher, nullptr);

  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(searcher->Next().has_value());
    clock.Advance(absl::Minutes(3));  // 9 minutes in: still before the deadline
  }
  EXPECT_FALSE(searcher->Finished());
  clock.Advance(absl::Seconds(59));
  ASSERT_TRUE(searcher->Next().has_value());
  clock.Advance(absl::Seconds(1));  // exactly at the deadline
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());
  clock.Advance(absl::Hours(1));
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());
}

TEST(ExhaustiveSearcher, DeadlineAlreadyPastProposesNothing) {
  FakeClock clock;
  SearchBudget budget;
  budget.deadline = clock.Now() - absl::Seconds(1);
  std::unique_ptr<Searcher> searcher = MustCreate(SpaceOf(8), budget, &clock);
  ASSERT_NE(searcher, nullptr);
  EXPECT_TRUE(searcher->Finished());
  EXPECT_FALSE(searcher->Next().has_value());

  budget.deadline = absl::InfinitePast();
  searcher = MustCreate(SpaceOf(8), budget, /*clock=*/nullptr);  // real clock
  ASSERT_NE(searcher, nullptr);
  EXPECT_FALSE(searcher->Next().has_value());
}

TEST(ExhaustiveSearcher, BestIsFastestSucceededTrialThatFits) {
  FakeClock clock;
  const std::vector<Strategy> space = SpaceOf(8);
  constexpr int64_t kGiB = int64_t{1} << 30;
  std::unique_ptr<Searcher> searcher = MustCreate(space, SearchBudget{}, &clock, 2 * kGiB);
  ASSERT_NE(searcher, nullptr);
  EXPECT_FALSE(searcher->Best().has_value());

  std::vector<Strategy> s;
  for (int i = 0; i < 7; ++i) s.push_back(searcher->Next()->strategy);
  searcher->Report(Trial(s[0], TrialStatus::kSucceeded, 100, 1 * kGiB));
  ASSERT_TRUE(searcher->Best().has_value());
  EXPECT_EQ(searcher->Best()->strategy, s[0]);

  searcher->Report(Trial(s[1], TrialStatus::kOom, 1000, 1 * kGiB));
  searcher->Report(Trial(s[2], TrialStatus::kFailed, 900, 1 * kGiB));
  searcher->Report(Trial(s[3], TrialStatus::kTimeout, 800, 1 * kGiB));
  searcher->Report(Trial(s[4], TrialStatus::kSucceeded, 700, 2 * kGiB + 1));  // over the limit
  searcher->Report(Trial(s[5], TrialStatus::kPruned, 600, 1 * kGiB));
  EXPECT_EQ(searcher->Best()->strategy, s[0]);

  searcher->Report(Trial(s[6], TrialStatus::kSucceeded, 200, 2 * kGiB));  // exactly fits
  std::optional<ScoredTrial> best = searcher->Best();
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->strategy, s[6]);
  EXPECT_EQ(best->status, TrialStatus::kSucceeded);
  EXPECT_EQ(best->metrics.tokens_per_second, 200);
  EXPECT_EQ(best->metrics.peak_memory_bytes, 2 * kGiB);
}

TEST(ExhaustiveSearcher, WithoutMemoryLimitEverySucceededTrialCounts) {
  FakeClock clock;
  std::unique_ptr<Searcher> searcher = MustCreate(SpaceOf(8), SearchBudget{}, &clock);
  ASSERT_NE(searcher, nullptr);
  const Strategy a = searcher->Next()->strategy;
  const Strategy b = searcher->Next()->strategy;
  searcher->Report(Trial(a, TrialStatus::kSucceeded, 100, 1));
  searcher->Report(Trial(b, TrialStatus::kSucceeded, 300, int64_t{1} << 50));
  ASSERT_TRUE(searcher->Best().has_value());
  EXPECT_EQ(searcher->Best()->strategy, b);
}

TEST(SelectBest, TiesGoToLowerMemoryThenToTheEarlierTrial) {
  const Strategy a = MakeStrategy(1, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const Strategy b = MakeStrategy(1, 1, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa);
  const Strategy c = MakeStrategy(1, 1, Precision::kFp32, Checkpointing::kFull, Attention::kSdpa);
  std::optional<ScoredTrial> best = SelectBest(
      {Trial(a, TrialStatus::kSucceeded, 500, 300), Trial(b, TrialStatus::kSucceeded, 500, 200),
       Trial(c, TrialStatus::kSucceeded, 500, 200)},
      0);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->strategy, b);
}

TEST(SelectBest, IgnoresNonFiniteThroughputAndReturnsNothingWhenNoneEligible) {
  const Strategy a = MakeStrategy(1, 1, Precision::kBf16, Checkpointing::kNone, Attention::kSdpa);
  const Strategy b = MakeStrategy(1, 1, Precision::kFp32, Checkpointing::kNone, Attention::kSdpa);
  std::optional<ScoredTrial> best =
      SelectBest({Trial(a, TrialStatus::kSucceeded, std::nan(""), 1),
                  Trial(a, TrialStatus::kSucceeded, std::numeric_limits<double>::infinity(), 1),
                  Trial(b, TrialStatus::kSucceeded, 10, 1)},
                 0);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->strategy, b);

  EXPECT_FALSE(SelectBest({}, 0).has_value());
  EXPECT_FALSE(
      SelectBest(
          {Trial(a, TrialStatus::kOom, 10, 1), Trial(b, TrialStatus::kPruned, 10, 1),
           Trial(b, TrialStatus::kCancelled, 10, 1), Trial(b, TrialStatus::kSucceeded, 10, 101)},
          100)
          .has_value());
}

TEST(ExhaustiveSearcher, AValueThatKeepsFailingIsPrunedAfterTwoTrials) {
  // A launcher script that exits 2 on any sharding but none.
  std::vector<Strategy> space;
  for (const char* sharding : {"none", "zero1", "zero2"}) {
    for (int mbs : {1, 2, 4}) {
      absl::StatusOr<Strategy> s = ParseStrategyText(absl::StrCat(
          "dp=2,tp=1,pp=1,sharding=", sharding, ",mbs=", mbs,
          ",ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none"));
      ASSERT_TRUE(s.ok()) << s.status();
      space.push_back(*s);
    }
  }
  std::unique_ptr<Searcher> searcher = MustCreate(space, SearchBudget{}, nullptr);
  ASSERT_NE(searcher, nullptr);
  int ran = 0, failed = 0;
  std::vector<PrunedStrategy> pruned;
  while (std::optional<Proposal> next = searcher->Next()) {
    ++ran;
    ScoredTrial t = Trial(next->strategy, TrialStatus::kSucceeded, 1000, 1);
    if (next->strategy.sharding != Sharding::kNone) {
      t.status = TrialStatus::kFailed;
      t.reason = absl::StrCat("rank ", ran % 2, " on worker w", ran,
                              ":7000: script exited with code 2: sharding is not supported");
      ++failed;
    }
    searcher->Report(t);
    for (PrunedStrategy& p : searcher->TakePruned()) pruned.push_back(std::move(p));
  }
  EXPECT_EQ(failed, 4) << "two trials per failing value";
  EXPECT_EQ(ran, 7);
  ASSERT_EQ(pruned.size(), 2u);
  for (const PrunedStrategy& p : pruned) {
    EXPECT_NE(p.strategy.sharding, Sharding::kNone);
    EXPECT_THAT(p.reason, ::testing::StartsWith(kPrunedByFailures));
    EXPECT_THAT(p.reason, ::testing::HasSubstr("script exited with code 2"));
  }
  EXPECT_TRUE(searcher->Finished());
}

TEST(ExhaustiveSearcher, CreateRejectsBadArguments) {
  FakeClock clock;
  EXPECT_THAT(CreateExhaustiveSearcher({}, SearchBudget{}, &clock).status(),
              InvalidArgument(StartsWith("space:")));
  SearchBudget budget;
  budget.max_trials = -1;
  EXPECT_THAT(CreateExhaustiveSearcher(SpaceOf(8), budget, &clock).status(),
              InvalidArgument(StartsWith("max_trials:")));
  EXPECT_THAT(CreateExhaustiveSearcher(SpaceOf(8), SearchBudget{}, &clock, -1).status(),
              InvalidArgument(StartsWith("memory_limit_bytes:")));
  std::vector<Strategy> space = SpaceOf(8);
  space[3].grad_accum_steps = 0;
  EXPECT_THAT(CreateExhaustiveSearcher(space, SearchBudget{}, &clock).status(),
              InvalidArgument(StartsWith("space[3]:")));
}

// End to end on a toy device: run every proposal through a fake executor with
// a made-up throughput model and a memory ceiling; the searcher's answer must
// be the brute-force best of what fits.
TEST(ExhaustiveSearcher, FindsTheBestStrategyOfAToyDevice) {
  SpaceRequest request = BaseRequest(64, 2);
  absl::StatusOr<std::vector<Strategy>> space = EnumerateSpace(request);
  ASSERT_TRUE(space.ok()) << space.status();

  const auto run = [](const Strategy& s) {
    ScoredTrial t;
    t.strategy = s;
    const double act = s.micro_batch_size * (s.checkpointing == Checkpointing::kFull ? 1 : 4) *
                       (s.attention == Attention::kMath ? 3 : 1) *
                       (s.precision == Precision::kBf16 ? 1 : 2);
    t.metrics.peak_memory_bytes = static_cast<int64_t>(1000 + 100 * act);
    if (t.metrics.peak_memory_bytes > 4000) {
      t.status = TrialStatus::kOom;
      return t;
    }
    t.status = TrialStatus::kSucceeded;
    t.metrics.tokens_per_second = 1000.0 * (s.precision == Precision::kBf16 ? 2 : 1) *
                                  (s.attention == Attention::kSdpa ? 1.5 : 1) *
                                  (s.checkpointing == Checkpointing::kFull ? 0.75 : 1) *
                                  (1.0 - 1.0 / (1 + s.micro_batch_size));
    return t;
  };

  std::vector<ScoredTrial> all;
  for (const Strategy& s : *space) all.push_back(run(s));
  const std::optional<ScoredTrial> expected = SelectBest(all, 3500);
  ASSERT_TRUE(expected.has_value());

  FakeClock clock;
  std::unique_ptr<Searcher> searcher = MustCreate(*space, SearchBudget{}, &clock, 3500);
  ASSERT_NE(searcher, nullptr);
  int trials = 0;
  while (std::optional<Proposal> p = searcher->Next()) {
    searcher->Report(run(p->strategy));
    ++trials;
  }
  EXPECT_EQ(trials, static_cast<int>(space->size()));
  ASSERT_TRUE(searcher->Best().has_value());
  EXPECT_EQ(searcher->Best()->strategy, expected->strategy);
  // bf16 + sdpa + no checkpointing at mbs 4 is 1000 + 100 * 16 = 2600 bytes;
  // mbs 8 would need 4200 and OOMs.
  // The toy device ignores the optimizer: fused_adamw ties and comes first.
  // The toy device ignores the layout as well: two data-parallel ranks, the
  // first layout, win the tie.
  EXPECT_EQ(StrategyToText(searcher->Best()->strategy),
            "dp=2,tp=1,pp=1,sharding=none,mbs=4,ga=8,precision=bf16,checkpoint=none,"
            "attention=sdpa,optimizer=fused_adamw,offload=none");
}

}  // namespace
}  // namespace autoaccel
