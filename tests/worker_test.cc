// The worker's child-process handling, with small shell scripts standing in
// for the trial runner: whatever the child does, the daemon gets a result.
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"
#include "worker/trial_process.h"
#include "worker/worker_service.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;

class TrialProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-worker-");
    spec_.trial_id = "t1";
    spec_.model.family = "gpt2";
    spec_.model.n_layer = 1;
    spec_.model.n_embd = 8;
    spec_.model.n_head = 2;
    spec_.model.vocab_size = 16;
    spec_.model.n_positions = 8;
    spec_.model.n_inner = 32;
    spec_.seq_len = 4;
    spec_.global_batch_size = 1;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A stand-in runner: `body` runs with $2 = spec path and $4 = result path.
  TrialProcessOptions Runner(const std::string& body, absl::Duration timeout = absl::Seconds(20)) {
    const std::string path = absl::StrCat(dir_, "/runner", ++scripts_, ".sh");
    testing::WriteFile(path, "#!/bin/sh\n" + body + "\n");
    ::chmod(path.c_str(), 0755);
    TrialProcessOptions options;
    options.runner_path = path;
    options.work_dir = dir_;
    options.timeout = timeout;
    return options;
  }

  std::string dir_;
  int scripts_ = 0;
  TrialSpec spec_;
};

TEST_F(TrialProcessTest, ReadsTheRunnersResult) {
  TrialResult r = RunTrialProcess(spec_, Runner(R"(test -f "$2" || exit 9
cat > "$4" <<'JSON'
{"status": "SUCCEEDED", "error": "", "metrics": {"tokens_per_second": 1234.5, "peak_memory_bytes": 42}}
JSON)"));
  EXPECT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_EQ(r.metrics.tokens_per_second, 1234.5);
  EXPECT_EQ(r.metrics.peak_memory_bytes, 42);
}

TEST_F(TrialProcessTest, AnAbortBecomesAFailedTrialWithTheSignalAndTheLog) {
  TrialResult r = RunTrialProcess(spec_, Runner("echo 'about to abort' >&2\nkill -ABRT $$"));
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_THAT(r.error, HasSubstr("signal 6"));
  EXPECT_THAT(r.error, HasSubstr("about to abort"));
}

TEST_F(TrialProcessTest, AnExitWithoutResultIsAFailure) {
  TrialResult r = RunTrialProcess(spec_, Runner("echo boom\nexit 3"));
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_THAT(r.error, HasSubstr("exited with code 3"));
  EXPECT_THAT(r.error, HasSubstr("boom"));
}

TEST_F(TrialProcessTest, TimeoutStopsTheWholeProcessGroup) {
  const std::string marker = dir_ + "/grandchild-survived";
  const absl::Time start = absl::Now();
  TrialResult r = RunTrialProcess(
      spec_, Runner(absl::StrCat("(sleep 3; touch ", marker, ") &\nsleep 30"), absl::Seconds(1)));
  EXPECT_EQ(r.status, TrialStatus::kTimeout);
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  absl::SleepFor(absl::Seconds(3));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a process of the trial outlived it";
}

TEST_F(TrialProcessTest, CancellationStopsTheChild) {
  std::atomic<bool> cancel{false};
  TrialProcessOptions options = Runner("sleep 30");
  options.should_cancel = [&] { return cancel.load(); };
  std::thread([&] {
    absl::SleepFor(absl::Milliseconds(300));
    cancel = true;
  }).detach();
  const absl::Time start = absl::Now();
  TrialResult r = RunTrialProcess(spec_, options);
  EXPECT_EQ(r.status, TrialStatus::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(TrialProcessTest, AMissingRunnerIsAFailureNotACrash) {
  TrialProcessOptions options = Runner("exit 0");
  options.runner_path = dir_ + "/no-such-runner";
  TrialResult r = RunTrialProcess(spec_, options);
  EXPECT_EQ(r.status, TrialStatus::kFailed);
}

TEST(ParseDevicesTest, CpuSlotsShareMemoryAndBadTextIsRejected) {
  auto cpus = ParseDevices("cpu:4", int64_t{8} << 30);
  ASSERT_TRUE(cpus.ok());
  ASSERT_EQ(cpus->size(), 4u);
  EXPECT_EQ((*cpus)[3].index(), 3);
  EXPECT_EQ((*cpus)[3].memory_bytes(), int64_t{8} << 30);
  auto gpus = ParseDevices("cuda:0,1", 0);
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[1].name(), "cuda:1");
  for (const char* bad : {"cpu:0", "cpu:x", "gpu:1", "cuda:", "cpu"}) {
    EXPECT_THAT(ParseDevices(bad, 0).status().message(), HasSubstr("--devices")) << bad;
  }
}

}  // namespace
}  // namespace autoaccel
