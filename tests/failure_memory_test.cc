// What failed trials teach the search (search/failure_memory.h).
#include "search/failure_memory.h"

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/strategy.h"

namespace autoaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Strategy S(const std::string& text) {
  absl::StatusOr<Strategy> s = ParseStrategyText(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.value_or(Strategy());
}

std::vector<std::string> ValuesOf(const std::vector<FailingValue>& failing) {
  std::vector<std::string> out;
  for (const FailingValue& f : failing) out.push_back(absl::StrJoin(f.values, "+"));
  return out;
}

const char kExit2[] = "rank 0 on worker host-a:7000: script exited with code 2: no sharding here";

std::string Layout(const std::string& sharding, int mbs, const std::string& precision) {
  return "dp=2,tp=1,pp=1,sharding=" + sharding + ",mbs=" + std::to_string(mbs) +
         ",ga=1,precision=" + precision +
         ",checkpoint=none,attention=sdpa,optimizer=adamw,offload=none";
}

TEST(FailureMemoryTest, ReasonsAreComparedWithoutTheRankAndWorker) {
  EXPECT_EQ(ReasonSummary(kExit2), "script exited with code 2: no sharding here");
  EXPECT_EQ(ReasonKey(kExit2), "script exited with code #: no sharding here");
  EXPECT_EQ(ReasonKey("rank 1 on worker host-b:7001: script exited with code 2: no sharding here"),
            ReasonKey(kExit2));
}

TEST(FailureMemoryTest, AValueThatFailsTwiceForOneReasonWhileAnotherSucceedsIsKnownToFail) {
  FailureMemory m;
  EXPECT_THAT(m.Succeeded(S(Layout("none", 2, "bf16"))), IsEmpty());
  EXPECT_THAT(m.Failed(S(Layout("zero1", 2, "bf16")), kExit2), IsEmpty()) << "once is not enough";
  const std::vector<FailingValue> failing =
      m.Failed(S(Layout("zero1", 4, "fp32")),
               "rank 1 on worker host-b:7001: script exited with code 2: no sharding here");
  ASSERT_THAT(ValuesOf(failing), ElementsAre("sharding=zero1"));
  EXPECT_THAT(failing[0].prune_reason,
              AllOf(HasSubstr(kPrunedByFailures), HasSubstr("sharding=zero1 failed in 2 trials"),
                    HasSubstr("script exited with code 2")));
  // Known once: not returned again.
  EXPECT_THAT(m.Failed(S(Layout("zero1", 8, "fp32")), kExit2), IsEmpty());
}

TEST(FailureMemoryTest, DifferentReasonsDoNotAddUp) {
  FailureMemory m;
  m.Succeeded(S(Layout("none", 2, "bf16")));
  m.Failed(S(Layout("zero1", 2, "bf16")), "script exited with code 2: no zero1");
  EXPECT_THAT(m.Failed(S(Layout("zero1", 4, "bf16")), "loss is not finite"), IsEmpty());
}

TEST(FailureMemoryTest, AValueThatSucceededOnceNeverFails) {
  FailureMemory m;
  m.Succeeded(S(Layout("none", 2, "bf16")));
  m.Succeeded(S(Layout("zero1", 8, "bf16")));
  m.Failed(S(Layout("zero1", 2, "bf16")), kExit2);
  EXPECT_THAT(m.Failed(S(Layout("zero1", 4, "bf16")), kExit2), IsEmpty());
}

TEST(FailureMemoryTest, NothingIsKnownWhileTwoNeverMeasuredValuesCouldBeTheCause) {
  FailureMemory m;
  // fp32 never succeeded either: zero1 or fp32 may be what fails.
  m.Succeeded(S(Layout("none", 2, "bf16")));
  m.Failed(S(Layout("zero1", 2, "fp32")), kExit2);
  EXPECT_THAT(m.Failed(S(Layout("zero1", 4, "fp32")), kExit2), IsEmpty());
  // fp32 succeeds with sharding none: zero1 is the cause.
  EXPECT_THAT(ValuesOf(m.Succeeded(S(Layout("none", 4, "fp32")))), ElementsAre("sharding=zero1"));
}

TEST(FailureMemoryTest, AJobWhoseEveryTrialFailsLearnsNoValue) {
  FailureMemory m;
  m.Failed(S(Layout("none", 2, "bf16")), kExit2);
  EXPECT_THAT(m.Failed(S(Layout("zero1", 2, "bf16")), kExit2), IsEmpty())
      << "no value of any dimension succeeded: the script, not a value, fails";
}

TEST(FailureMemoryTest, APairThatFailsTwiceWhileEachOfItsValuesSucceedsWithoutTheOtherIsKnown) {
  FailureMemory m;
  m.Succeeded(S(Layout("zero1", 2, "bf16")));
  m.Succeeded(S(Layout("none", 2, "fp16")));
  m.Succeeded(S(Layout("none", 4, "bf16")));
  EXPECT_THAT(m.Failed(S(Layout("zero1", 2, "fp16")), kExit2), IsEmpty()) << "once is not enough";
  const std::vector<FailingValue> failing = m.Failed(S(Layout("zero1", 4, "fp16")), kExit2);
  ASSERT_THAT(ValuesOf(failing), ElementsAre("precision=fp16+sharding=zero1"));
  EXPECT_THAT(failing[0].prune_reason,
              AllOf(HasSubstr(kPrunedByFailingPair),
                    HasSubstr("precision=fp16 with sharding=zero1 failed in 2 trials and never "
                              "succeeded together"),
                    HasSubstr("script exited with code 2")));
  EXPECT_TRUE(failing[0].In(FailureMemory::Values(S(Layout("zero1", 8, "fp16")))));
  EXPECT_FALSE(failing[0].In(FailureMemory::Values(S(Layout("zero1", 8, "bf16")))));
  EXPECT_FALSE(failing[0].In(FailureMemory::Values(S(Layout("zero2", 8, "fp16")))));
  // Known once: not returned again.
  EXPECT_THAT(m.Failed(S(Layout("zero1", 8, "fp16")), kExit2), IsEmpty());
}

TEST(FailureMemoryTest, NoPairIsKnownWhileAnotherPairTheFailuresShareNeverSucceeded) {
  FailureMemory m;
  m.Succeeded(S(Layout("zero1", 4, "bf16")));
  m.Succeeded(S(Layout("none", 2, "fp16")));
  // Both failures have zero1, fp16 and mbs=4: zero1 with fp16, or mbs=4
  // with fp16 (never run together either), may be what fails.
  m.Failed(S(Layout("zero1", 4, "fp16")), kExit2);
  EXPECT_THAT(m.Failed(S(Layout("zero1", 4, "fp16")), kExit2), IsEmpty());
  // mbs=4 with fp16 succeeds: zero1 with fp16 is the cause.
  EXPECT_THAT(ValuesOf(m.Succeeded(S(Layout("none", 4, "fp16")))),
              ElementsAre("precision=fp16+sharding=zero1"));
}

TEST(FailureMemoryTest, APairIsNotBlamedWhileOneOfItsValuesNeverSucceeded) {
  FailureMemory m;
  m.Succeeded(S(Layout("none", 2, "bf16")));
  m.Succeeded(S(Layout("zero1", 2, "bf16")));
  // fp16 never succeeded: the value is blamed, not its pair with zero1.
  m.Failed(S(Layout("zero1", 2, "fp16")), kExit2);
  EXPECT_THAT(ValuesOf(m.Failed(S(Layout("zero1", 4, "fp16")), kExit2)),
              ElementsAre("precision=fp16"));
}

}  // namespace
}  // namespace autoaccel
