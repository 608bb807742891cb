// What killed workers leave behind, swept by the next worker on the work dir
// (worker/stale_dirs.h): a dead worker's sandbox and shared-memory
// directories go; a live worker's, and those of workers of other work dirs,
// stay.
#include "worker/stale_dirs.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace autoaccel {
namespace {
namespace fs = std::filesystem;

// The pid of a process that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(StaleDirsTest, ADeadWorkersDirectoriesGoAndALiveOnesStay) {
  const std::string dir = testing::MakeTempDir("autoaccel-stale-");
  const std::string work = dir + "/work", shm = dir + "/shm";
  fs::create_directories(work);
  fs::create_directories(shm);
  // A live "autoaccel-worker": a copy of sleep by that name.
  const std::string live_bin = dir + "/autoaccel-worker";
  fs::copy_file("/bin/sleep", live_bin);
  const pid_t live = ::fork();
  if (live == 0) {
    ::execl(live_bin.c_str(), live_bin.c_str(), "30", nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 100 && !IsLiveWorker(live); ++i) ::usleep(10000);
  ASSERT_TRUE(IsLiveWorker(live));
  EXPECT_FALSE(IsLiveWorker(::getpid())) << "a test binary is no worker";
  const pid_t dead = DeadPid();
  EXPECT_FALSE(IsLiveWorker(dead));

  for (pid_t pid : {live, dead}) {
    fs::create_directories(absl::StrCat(work, "/sandbox-", pid));
    testing::WriteFile(absl::StrCat(work, "/sandbox-", pid, "/passwd"), "x\n");
    fs::create_directories(absl::StrCat(shm, "/autoaccel-", pid, "-job-t0001"));
    fs::create_directories(absl::StrCat(shm, "/autoaccel-", pid, "-job-t0002"));
  }
  // A dead worker of another work dir: not this worker's to prove dead.
  const pid_t stranger = DeadPid();
  fs::create_directories(absl::StrCat(shm, "/autoaccel-", stranger, "-job-t0001"));
  fs::create_directories(work + "/sandbox-notapid");

  const SweptDirs swept = SweepDeadWorkersDirs(work, shm);
  EXPECT_EQ(swept.sandbox, 1);
  EXPECT_EQ(swept.shm, 2);
  EXPECT_FALSE(fs::exists(absl::StrCat(work, "/sandbox-", dead)));
  EXPECT_FALSE(fs::exists(absl::StrCat(shm, "/autoaccel-", dead, "-job-t0001")));
  EXPECT_TRUE(fs::exists(absl::StrCat(work, "/sandbox-", live)));
  EXPECT_TRUE(fs::exists(absl::StrCat(shm, "/autoaccel-", live, "-job-t0002")));
  EXPECT_TRUE(fs::exists(absl::StrCat(shm, "/autoaccel-", stranger, "-job-t0001")));
  EXPECT_TRUE(fs::exists(work + "/sandbox-notapid"));
  EXPECT_EQ(SweepDeadWorkersDirs(work, shm).sandbox, 0) << "nothing twice";

  ::kill(live, SIGKILL);
  ::waitpid(live, nullptr, 0);
  fs::remove_all(dir);
}

// A stopping worker removes its own, alive as it is.
TEST(StaleDirsTest, AStoppingWorkerRemovesItsOwnDirectories) {
  const std::string dir = testing::MakeTempDir("autoaccel-own-");
  const std::string work = dir + "/work", shm = dir + "/shm";
  const pid_t me = ::getpid();
  fs::create_directories(absl::StrCat(work, "/sandbox-", me));
  fs::create_directories(absl::StrCat(shm, "/autoaccel-", me, "-job-t0001"));
  fs::create_directories(absl::StrCat(shm, "/autoaccel-", me + 1, "-job-t0001"));
  const SweptDirs removed = RemoveWorkerDirs(me, work, shm);
  EXPECT_EQ(removed.sandbox, 1);
  EXPECT_EQ(removed.shm, 1);
  EXPECT_TRUE(fs::exists(absl::StrCat(shm, "/autoaccel-", me + 1, "-job-t0001")));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace autoaccel
