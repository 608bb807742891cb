// What `autoaccel logs` reads on a worker (worker/rank_logs.h), on a real
// directory: the last lines of each of a rank's files, a cut through a long
// file at a whole line, and the errors a user sees for a rank directory
// that is gone or a request that names no file.
#include "worker/rank_logs.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "worker/child_process.h"

namespace autoaccel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RankLogsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("autoaccel-rank-logs-"); }
  void TearDown() override { fs::remove_all(dir_); }
  static v1::ReadRankLogsRequest Request(int tail_lines = 0) {
    v1::ReadRankLogsRequest r;
    r.set_trial_id("job-7-t0003");
    r.set_attempt(2);
    r.set_rank(1);
    r.set_tail_lines(tail_lines);
    return r;
  }
  std::string RankDir() {
    const std::string d = dir_ + "/job-7-t0003-a2-r1";
    fs::create_directories(d);
    return d;
  }
  // The answer; an empty one (and a failed test) on an error.
  v1::RankLogs Read(const v1::ReadRankLogsRequest& request, bool running = false) {
    absl::StatusOr<v1::RankLogs> logs = ReadRankLogs(dir_, request, running);
    EXPECT_OK(logs);
    return logs.ok() ? *logs : v1::RankLogs();
  }
  std::string dir_;
};

// "line 1\nline 2\n...line n\n"
std::string Lines(int n) {
  std::string text;
  for (int i = 1; i <= n; ++i) absl::StrAppend(&text, "line ", i, "\n");
  return text;
}

TEST_F(RankLogsTest, EachFileThatExistsInTheRanksDirectoryWithItsLastLines) {
  const std::string d = RankDir();
  testing::WriteFile(d + "/metrics.jsonl", "{\"step\": 1}\n{\"step\": 2}\n");
  testing::WriteFile(d + "/stderr.log", Lines(150));
  testing::WriteFile(d + "/spec.json", "{}");  // not a log: never shown
  v1::RankLogs logs = Read(Request(), /*running=*/true);
  EXPECT_TRUE(logs.running());
  EXPECT_EQ(logs.directory(), fs::absolute(d).string());
  ASSERT_EQ(logs.files_size(), 2);
  EXPECT_EQ(logs.files(0).name(), "stderr.log");
  EXPECT_EQ(logs.files(0).tail(), Lines(150).substr(Lines(50).size()))
      << "the last 100 lines by default";
  EXPECT_TRUE(logs.files(0).truncated());
  EXPECT_EQ(logs.files(0).size_bytes(), static_cast<int64_t>(Lines(150).size()));
  EXPECT_EQ(logs.files(1).name(), "metrics.jsonl");
  EXPECT_EQ(logs.files(1).tail(), "{\"step\": 1}\n{\"step\": 2}\n");
  EXPECT_FALSE(logs.files(1).truncated());

  logs = Read(Request(3));
  EXPECT_EQ(logs.files(0).tail(), "line 148\nline 149\nline 150\n");
  EXPECT_FALSE(logs.running());
}

TEST_F(RankLogsTest, AFileWithoutAFinalNewlineAndOneShorterThanAskedAreWhole) {
  testing::WriteFile(RankDir() + "/trial.log", "step 1\nTraceback: boom");
  v1::RankLogs logs = Read(Request(2));
  ASSERT_EQ(logs.files_size(), 1);
  EXPECT_EQ(logs.files(0).tail(), "step 1\nTraceback: boom");
  EXPECT_FALSE(logs.files(0).truncated());
  logs = Read(Request(1));
  EXPECT_EQ(logs.files(0).tail(), "Traceback: boom");
  EXPECT_TRUE(logs.files(0).truncated());
}

TEST_F(RankLogsTest, ALongFileIsReadFromItsEndAndCutAtAWholeLine) {
  const std::string path = RankDir() + "/stderr.log";
  testing::WriteFile(path, Lines(20000));  // ~220 KB
  absl::StatusOr<FileTail> read = ReadFileTail(path, 10000, /*max_bytes=*/1000);
  ASSERT_OK(read);
  const FileTail& tail = *read;
  EXPECT_TRUE(tail.truncated);
  EXPECT_EQ(tail.size_bytes, static_cast<int64_t>(Lines(20000).size()));
  EXPECT_THAT(tail.text, ::testing::StartsWith("line "));
  EXPECT_THAT(tail.text, ::testing::EndsWith("line 20000\n"));
  EXPECT_LE(tail.text.size(), 1000u);
  EXPECT_GT(tail.text.size(), 980u) << "all but the cut line of the last 1000 bytes";
}

TEST_F(RankLogsTest, AGoneDirectoryAndBadRequestsSayWhy) {
  EXPECT_THAT(ReadRankLogs(dir_, Request(), false),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("--keep-trial-dirs")));
  v1::ReadRankLogsRequest escape = Request();
  escape.set_trial_id("../../etc");
  EXPECT_THAT(ReadRankLogs(dir_, escape, false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trial_id")));
  RankDir();
  EXPECT_THAT(ReadRankLogs(dir_, Request(kMaxRankLogLines + 1), false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tail_lines")));
  v1::ReadRankLogsRequest negative = Request();
  negative.set_rank(-1);
  EXPECT_THAT(ReadRankLogs(dir_, negative, false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank")));
  EXPECT_EQ(Read(Request()).files_size(), 0) << "a rank that wrote nothing yet";
}

}  // namespace
}  // namespace autoaccel
