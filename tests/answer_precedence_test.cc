// Which stored answer wins (server/database_answer.h ReplacesStoredAnswer),
// the precedence Store::FinishJob executes.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/database_answer.h"

namespace autoaccel {
namespace {

// An answer for one signature: its job, figure, kind and engine version.
StrategyRecord Versioned(const std::string& job_id, double tokens_per_second, bool confirmed,
                         int engine_version) {
  StrategyRecord s;
  s.signature = "sig";
  s.job_id = job_id;
  s.metrics.tokens_per_second = tokens_per_second;
  s.confirmed = confirmed;
  s.engine_version = engine_version;
  return s;
}

TEST(AnswerPrecedenceTest, ANewerEngineVersionsAnswerReplacesAnOlderOneEvenWhenSlower) {
  const StrategyRecord old_fast = Versioned("old", 5000, /*confirmed=*/true, 1);
  const StrategyRecord new_slow = Versioned("new", 100, /*confirmed=*/false, 2);
  EXPECT_TRUE(ReplacesStoredAnswer(new_slow, old_fast));
  // Answers stored before versions were recorded (0) are older than any.
  EXPECT_TRUE(ReplacesStoredAnswer(new_slow, Versioned("legacy", 9000, true, 0)));
}

TEST(AnswerPrecedenceTest, AnOlderEngineVersionsAnswerNeverReplacesANewerOne) {
  const StrategyRecord new_slow = Versioned("new", 100, /*confirmed=*/false, 2);
  EXPECT_FALSE(ReplacesStoredAnswer(Versioned("old", 5000, true, 1), new_slow));
  EXPECT_FALSE(ReplacesStoredAnswer(Versioned("legacy", 9000, true, 0), new_slow));
}

TEST(AnswerPrecedenceTest, WithinOneEngineVersionTheConfirmedThenTheFasterAnswerStays) {
  EXPECT_TRUE(ReplacesStoredAnswer(Versioned("b", 500, true, 2), Versioned("a", 900, false, 2)));
  EXPECT_FALSE(ReplacesStoredAnswer(Versioned("b", 900, false, 2), Versioned("a", 500, true, 2)));
  EXPECT_TRUE(ReplacesStoredAnswer(Versioned("b", 600, true, 2), Versioned("a", 500, true, 2)));
  EXPECT_FALSE(ReplacesStoredAnswer(Versioned("b", 400, true, 2), Versioned("a", 500, true, 2)));
  EXPECT_TRUE(ReplacesStoredAnswer(Versioned("b", 500, true, 2), Versioned("a", 500, true, 2)));
}

}  // namespace
}  // namespace autoaccel
