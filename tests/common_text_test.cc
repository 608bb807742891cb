// Text the user gives that common/ reads: durations (common/duration.h) and
// the UTF-8 check (common/utf8.h).
#include <string>

#include "absl/time/time.h"
#include "common/duration.h"
#include "common/status_matchers.h"
#include "common/trial_reason.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

TEST(Duration, ParsesNumbersWithUnitsAndTheirSums) {
  EXPECT_EQ(*ParseDuration("90s"), absl::Seconds(90));
  EXPECT_EQ(*ParseDuration("1.5h"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("1m30s"), absl::Seconds(90));
  EXPECT_EQ(*ParseDuration("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(autoaccel::FormatDuration(absl::Seconds(90)), "1m30s");
}

TEST(Duration, RefusesWhatIsNotANumberAndAUnit) {
  for (const char* text : {"", "10", "1x", "..5s", "1e3s", "s", "-1s"}) {
    EXPECT_THAT(ParseDuration(text).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected a number")))
        << text;
  }
}

// Found by tests/fuzz/duration_fuzz: 400 digits parsed as an infinite time
// limit or timeout. Zero is the caller's to refuse (the server refuses a
// zero --time-limit), so it parses.
TEST(Duration, RefusesWhatWouldBeInfinite) {
  for (const std::string& text :
       {std::string(400, '9') + "h", std::string(400, '9') + "s", std::string(310, '9') + "ms"}) {
    EXPECT_THAT(ParseDuration(text).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("too large")))
        << text;
  }
  EXPECT_EQ(*ParseDuration("0s"), absl::ZeroDuration());
  EXPECT_EQ(*ParseDuration("0s1ms"), absl::Milliseconds(1));
}

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));
}

TEST(Utf8, NamesTheFirstBadByte) {
  struct Case {
    std::string text;
    size_t offset;
  };
  for (const Case& c :
       {Case{"ab\xff", 2}, Case{"\x80", 0}, Case{"x\xc3", 1}, Case{"\xc0\xaf", 0},  // overlong '/'
        Case{"\xe0\x80\xaf", 0},                                                    // overlong
        Case{"ok\xed\xa0\x80", 2},                                                  // a surrogate
        Case{"\xf4\x90\x80\x80", 0},  // above U+10FFFF
        Case{"\xe2\x82", 0}}) {       // cut short
    size_t offset = 99;
    EXPECT_FALSE(IsValidUtf8(c.text, &offset)) << c.text;
    EXPECT_EQ(offset, c.offset) << c.text;
  }
}

TEST(TrialReasonTest, ASummaryIsWhatHappenedAndTheLastLineOfStderr) {
  const std::string reason =
      "rank 1 on worker host-b:7001: script exited with code 1 after no step reported; stderr:\n"
      "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
      "ModuleNotFoundError: No module named 'trl'\n\n";
  EXPECT_EQ(ReasonSummary(reason),
            "script exited with code 1 after no step reported: ModuleNotFoundError: No module "
            "named 'trl'");
  EXPECT_EQ(ReasonSummary(reason, 30), "script exited with code 1 a...");
  EXPECT_EQ(ReasonSummary("worker w1:7000: lost (no heartbeat for 10s)"),
            "lost (no heartbeat for 10s)");
  EXPECT_EQ(ReasonSummary("loss is not finite"), "loss is not finite");
}

TEST(TrialReasonTest, KeysOfOneCauseOnOtherRanksAndTrialDirectoriesAreEqual) {
  EXPECT_EQ(ReasonKey("rank 0 on worker a:1: script exited with code 1 after no step reported; "
                      "stderr:\nFileNotFoundError: /work/sandbox-12/trial-0003/data.bin"),
            ReasonKey("rank 1 on worker b:2: script exited with code 1 after no step reported; "
                      "stderr:\nFileNotFoundError: /work/sandbox-7/trial-0011/data.bin"));
  EXPECT_NE(ReasonKey("script exited: ValueError: bad"), ReasonKey("script exited: KeyError: x"));
}

TEST(Utf8, CutTextKeepsShortTextAndCutsLongTextAtACharacter) {
  EXPECT_EQ(CutText("short", 10), "short");
  EXPECT_EQ(CutText("abcdefghij", 4), "abcd... (6 more bytes)");
  // "é" is two bytes: a cut inside it backs off to before it.
  const std::string cut = CutText("abc\xc3\xa9z", 4);
  EXPECT_EQ(cut, "abc... (3 more bytes)");
  EXPECT_TRUE(IsValidUtf8(cut));
}

}  // namespace
}  // namespace autoaccel
