#include "common/job_state.h"

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

constexpr JobState kAllStates[] = {JobState::kQueued,  JobState::kWaitingForWorkers,
                                   JobState::kRunning, JobState::kSucceeded,
                                   JobState::kFailed,  JobState::kCancelled};

TEST(JobStateTest, NamesRoundTripAndTerminalStates) {
  for (JobState s : kAllStates) {
    absl::StatusOr<JobState> parsed = ParseJobState(JobStateName(s));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(JobStateName(JobState::kWaitingForWorkers), "WAITING_FOR_WORKERS");
  absl::StatusOr<JobState> bad = ParseJobState("DONE");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("QUEUED"));
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
  EXPECT_FALSE(IsTerminal(JobState::kWaitingForWorkers));
  EXPECT_TRUE(IsTerminal(JobState::kSucceeded));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
}

// What a client watching v1::Job.state relies on to stop watching.
TEST(JobStateTest, ExactlySucceededFailedAndCancelledAreTerminalByName) {
  for (JobState s : kAllStates) {
    EXPECT_EQ(IsTerminalJobStateName(JobStateName(s)), IsTerminal(s)) << JobStateName(s);
  }
  EXPECT_TRUE(IsTerminalJobStateName("SUCCEEDED"));
  EXPECT_TRUE(IsTerminalJobStateName("FAILED"));
  EXPECT_TRUE(IsTerminalJobStateName("CANCELLED"));
  EXPECT_FALSE(IsTerminalJobStateName("RUNNING"));
  EXPECT_FALSE(IsTerminalJobStateName("QUEUED"));
  EXPECT_FALSE(IsTerminalJobStateName("succeeded"));  // names are exact
  EXPECT_FALSE(IsTerminalJobStateName(""));
  EXPECT_FALSE(IsTerminalJobStateName("DONE"));
}

}  // namespace
}  // namespace autoaccel
