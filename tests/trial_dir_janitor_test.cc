// The worker's work dir janitor (worker/trial_dir_janitor.h) on a real
// directory: which finished ranks' directories stay under a count or an age,
// failures kept four times as long, nothing else of the work dir touched.
#include "worker/trial_dir_janitor.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TrialDirJanitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-janitor-");
    fs::create_directories(dir_ + "/models");
    fs::create_directories(dir_ + "/launcher-cache/hf");
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A rank's directory with a log in it, as a finished rank leaves it.
  std::string Rank(int trial) {
    const std::string d = absl::StrCat(dir_, "/job-1-t", trial, "-a1-r0");
    fs::create_directories(d);
    testing::WriteFile(d + "/stderr.log", "boom\n");
    return d;
  }
  bool Exists(int trial) { return fs::exists(absl::StrCat(dir_, "/job-1-t", trial, "-a1-r0")); }
  std::string dir_;
};

TEST_F(TrialDirJanitorTest, KeepsTheNewestCountAndFailuresFourTimesAsMany) {
  TrialDirJanitor janitor(dir_, TrialDirLimit{2, absl::ZeroDuration()});
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  for (int i = 0; i < 4; ++i) janitor.Finished(Rank(i), false, t0 + absl::Seconds(i));
  EXPECT_FALSE(Exists(0));
  EXPECT_FALSE(Exists(1));
  EXPECT_TRUE(Exists(2));
  EXPECT_TRUE(Exists(3));
  for (int i = 10; i < 19; ++i) janitor.Finished(Rank(i), true, t0 + absl::Seconds(i));
  EXPECT_FALSE(Exists(10)) << "the ninth failure pushes out the first";
  for (int i = 11; i < 19; ++i) EXPECT_TRUE(Exists(i)) << i;
  EXPECT_TRUE(Exists(2)) << "successes and failures count apart";
  EXPECT_TRUE(fs::exists(dir_ + "/models"));
  EXPECT_TRUE(fs::exists(dir_ + "/launcher-cache/hf"));
}

TEST_F(TrialDirJanitorTest, AnAgeRemovesWhatIsOlderAndAdoptsWhatARestartFinds) {
  Rank(1);
  Rank(2);  // left by the worker before a restart
  TrialDirJanitor janitor(dir_, TrialDirLimit{0, absl::Minutes(10)});
  janitor.AdoptExisting();
  EXPECT_TRUE(Exists(1)) << "kept as failures: 40 minutes";
  const absl::Time now = absl::Now();
  janitor.Finished(Rank(3), false, now - absl::Minutes(11));
  janitor.Finished(Rank(4), false, now);
  EXPECT_FALSE(Exists(3));
  EXPECT_TRUE(Exists(4));
  janitor.Finished(Rank(5), false, now + absl::Minutes(41));
  EXPECT_FALSE(Exists(1));
  EXPECT_FALSE(Exists(2));
  EXPECT_FALSE(Exists(4));
  EXPECT_TRUE(Exists(5));
}

TEST(TrialDirLimitTest, ParsesACountAnAgeOrAllAndRefusesTheRest) {
  EXPECT_EQ(ParseTrialDirLimit("200")->count, 200);
  EXPECT_EQ(ParseTrialDirLimit("6h")->age, absl::Hours(6));
  EXPECT_EQ(ParseTrialDirLimit("2d")->age, absl::Hours(48));
  EXPECT_TRUE(ParseTrialDirLimit("all")->keeps_all());
  for (const char* bad : {"0", "-3", "soon", "", "99999999999d"}) {
    absl::StatusOr<TrialDirLimit> parsed = ParseTrialDirLimit(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--keep-trial-dirs"));
  }
  EXPECT_TRUE(IsRankDirName("job-20261127-1-t0003-a1-r0"));
  EXPECT_FALSE(IsRankDirName("models"));
  EXPECT_FALSE(IsRankDirName("launcher-cache"));
  EXPECT_FALSE(IsRankDirName("x-a1-r"));
}

}  // namespace
}  // namespace autoaccel
