// A running job's answer so far (server/answer_so_far.h): the shortcut that
// skips settling every measurement again names the same trial as settling
// them all would, after every result of random jobs.
#include "server/answer_so_far.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/answer.h"

namespace autoaccel {
namespace {

constexpr double kTolerance = 0.05;

// Texts of a few strategies that differ in what they switch on (a tie's
// answer is its simplest).
std::string StrategyText(int i) {
  const char* checkpoint[] = {"none", "selective", "full"};
  const char* offload[] = {"none", "optimizer"};
  return absl::StrCat("dp=", 1 + i % 2, ",tp=1,pp=1,sharding=", i % 4 < 2 ? "none" : "zero2",
                      ",mbs=", 1 + i, ",ga=1,precision=bf16,checkpoint=", checkpoint[i % 3],
                      ",attention=sdpa,optimizer=adamw,offload=", offload[(i / 3) % 2]);
}

TEST(AnswerSoFar, TheShortcutNamesTheTrialSettlingEveryMeasurementNames) {
  int skipped = 0, results = 0;
  for (unsigned seed = 1; seed <= 200; ++seed) {
    std::mt19937 random(seed);
    std::uniform_int_distribution<int> strategy(0, 999);
    std::uniform_real_distribution<double> tps(800, 1200);
    std::uniform_int_distribution<int> percent(0, 99);
    std::vector<TrialRecord> trials, measured;
    AnswerSoFarShortcut shortcut;
    std::string best;
    for (int i = 0; i < 60; ++i) {
      TrialRecord t;
      t.trial_id = absl::StrCat("j-t", i);
      t.job_id = "j";
      t.index = i;
      t.strategy_text = StrategyText(strategy(random));
      t.status = TrialStatus::kSucceeded;
      t.metrics.tokens_per_second = tps(random);
      t.metrics.step_time_median_s = 1;
      t.metrics.peak_memory_bytes = 100 + percent(random);
      // Some results measure a strategy again, as a job's last rounds
      // (confirmations) and successive halving (a search trial) do.
      const int roll = percent(random);
      if (roll < 25 && !measured.empty()) {
        const TrialRecord& earlier =
            measured[std::uniform_int_distribution<size_t>(0, measured.size() - 1)(random)];
        t.strategy_text = earlier.strategy_text;
        if (roll < 15) t.confirms = earlier.confirms.empty() ? earlier.trial_id : earlier.confirms;
      }
      if (roll >= 95) t.status = TrialStatus::kFailed;
      trials.push_back(t);
      if (t.status != TrialStatus::kSucceeded) continue;
      measured.push_back(t);
      ++results;
      if (shortcut.NoteIfUnchanged(t)) {
        ++skipped;
      } else {
        const Answer answer = ChooseAnswer(measured, 0, kTolerance);
        shortcut.Recomputed(answer, measured);
        best = answer.trial_id;
      }
      ASSERT_EQ(best, ChooseAnswer(trials, 0, kTolerance).trial_id)
          << "seed " << seed << ", after trial " << i;
    }
  }
  // It does skip: most results of a long search are slower than the best.
  EXPECT_GT(skipped, results / 3) << skipped << " of " << results;
}

TEST(AnswerSoFar, NothingIsSkippedBeforeTheFirstAnswerOrAfterForget) {
  TrialRecord fast;
  fast.trial_id = "j-t0";
  fast.strategy_text = StrategyText(0);
  fast.status = TrialStatus::kSucceeded;
  fast.metrics.tokens_per_second = 1000;
  fast.metrics.step_time_median_s = 1;
  TrialRecord slow = fast;
  slow.trial_id = "j-t1";
  slow.strategy_text = StrategyText(1);
  slow.metrics.tokens_per_second = 500;
  AnswerSoFarShortcut shortcut;
  EXPECT_FALSE(shortcut.NoteIfUnchanged(fast));
  shortcut.Recomputed(ChooseAnswer({fast}, 0, kTolerance), {fast});
  EXPECT_TRUE(shortcut.NoteIfUnchanged(slow));
  shortcut.Forget();  // e.g. a trial withdrawn
  slow.strategy_text = StrategyText(2);
  EXPECT_FALSE(shortcut.NoteIfUnchanged(slow));
}

}  // namespace
}  // namespace autoaccel
