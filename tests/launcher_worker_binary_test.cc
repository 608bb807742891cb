// autoaccel-worker --launchers: a bad file stops the worker at start (exit 2,
// naming the launcher and the field); a good one is printed and advertised in
// the registration, and the worker starts without a trial runner.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/autoaccel.grpc.pb.h"
#include "tests/local_server.h"
#include "tests/subprocess.h"

namespace autoaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A coordinator that only keeps the first registration.
class RecordingRegistry final : public v1::WorkerRegistry::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (!first_) {
      first_ = *request;
      registered_.Notify();
    }
    response->set_heartbeat_interval_seconds(1);
    response->set_session_token("session-of-" + request->worker_id());
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Leave(grpc::ServerContext*, const v1::LeaveRequest* request,
                     v1::LeaveResponse*) override {
    absl::MutexLock lock(&mu_);
    left_ = *request;
    return grpc::Status::OK;
  }
  std::optional<v1::LeaveRequest> Left() {
    absl::MutexLock lock(&mu_);
    return left_;
  }
  std::optional<v1::RegisterRequest> WaitForRegistration(absl::Duration timeout) {
    registered_.WaitForNotificationWithTimeout(timeout);
    absl::MutexLock lock(&mu_);
    return first_;
  }

 private:
  absl::Mutex mu_;
  absl::Notification registered_;
  std::optional<v1::RegisterRequest> first_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::LeaveRequest> left_ ABSL_GUARDED_BY(mu_);
};

class WorkerBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("autoaccel-worker-bin-"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(WorkerBinaryTest, ABadLaunchersFileStopsTheWorkerNamingTheLauncherAndField) {
  testing::WriteFile(
      dir_ + "/l.json",
      R"({"launchers": {"hf": {"argv": ["python3", "t.py"], "env": {"RANK": "1"}}}})");
  std::string out, err;
  const int code =
      testing::RunCommand({AUTOACCEL_WORKER_BIN, "--coordinator", "127.0.0.1:1", "--launchers",
                           dir_ + "/l.json", "--work-dir", dir_, "--peak-tflops", "bf16=1"},
                          dir_, &out, &err, absl::Seconds(30));
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_THAT(err, HasSubstr("launcher 'hf': env.RANK: the worker sets it"));
  const int missing = testing::RunCommand({AUTOACCEL_WORKER_BIN, "--launchers", dir_ + "/none.json",
                                           "--work-dir", dir_, "--peak-tflops", "bf16=1"},
                                          dir_, &out, &err, absl::Seconds(30));
  EXPECT_EQ(missing, 2);
  EXPECT_THAT(err, HasSubstr("none.json: not a readable file"));
}

TEST_F(WorkerBinaryTest, AWorkdirTheSandboxUserCannotReadStopsTheWorkerNamingPathAndFix) {
  if (::geteuid() != 0) GTEST_SKIP() << "ranks run as another user only under a root worker";
  const std::string proj = dir_ + "/proj";
  std::filesystem::create_directories(proj);
  testing::WriteFile(proj + "/train.py", "print('hi')\n");
  testing::WriteFile(dir_ + "/l.json",
                     absl::StrCat(R"({"launchers": {"hf": {"argv": ["{python}", ")", proj,
                                  R"(/train.py"], "workdir": ")", proj, R"("}}})"));
  const std::vector<std::string> argv = {
      AUTOACCEL_WORKER_BIN, "--coordinator", "127.0.0.1:1", "--launchers",
      dir_ + "/l.json",     "--devices",     "musa:0",      "--device-memory",
      "1073741824",         "--work-dir",    dir_ + "/work"};
  using std::filesystem::perms;
  std::filesystem::permissions(proj, perms::owner_all);  // 0700: nobody cannot enter it
  std::string out, err;
  EXPECT_EQ(testing::RunCommand(argv, dir_, &out, &err, absl::Seconds(60)), 2) << out << err;
  EXPECT_THAT(err, HasSubstr(absl::StrCat("launcher 'hf': cannot list and enter ", proj)));
  EXPECT_THAT(err, HasSubstr("the sandbox's user, nobody"));
  EXPECT_THAT(err, HasSubstr("chmod -R o+rX"));

  // Readable: the check passes and the worker goes on (here, to a
  // coordinator that is not there).
  std::filesystem::permissions(proj, perms::owner_all | perms::group_read | perms::group_exec |
                                         perms::others_read | perms::others_exec);
  std::filesystem::permissions(proj + "/train.py", perms::owner_read | perms::owner_write |
                                                       perms::group_read | perms::others_read);
  testing::Subprocess worker(argv, dir_, "worker");
  EXPECT_THAT(worker.WaitForLine("launchers:", absl::Seconds(30)), HasSubstr("launchers: hf"))
      << worker.Stderr();
}

TEST_F(WorkerBinaryTest, TheLaunchersArePrintedAndAdvertisedAndNoTrialRunnerIsNeeded) {
  RecordingRegistry registry;
  testing::LocalServer coordinator = testing::ServeLocally(&registry);
  ASSERT_NE(coordinator.server, nullptr);
  testing::WriteFile(dir_ + "/l.json", R"({"launchers": {
      "plain": {"argv": ["{python}", "train.py"]},
      "hf": {"argv": ["{python}", "train.py", "{*training_args}"], "format": "hf-trainer",
             "dimensions": ["precision", "micro_batch_size"]}}})");
  testing::Subprocess worker(
      {AUTOACCEL_WORKER_BIN, "--coordinator", absl::StrCat("127.0.0.1:", coordinator.port),
       "--launchers", dir_ + "/l.json", "--trial-runner", dir_ + "/no-runner", "--devices",
       "musa:0-1", "--device-memory", "1073741824", "--work-dir", dir_ + "/work"},
      dir_, "worker");
  EXPECT_THAT(worker.WaitForLine("launchers:", absl::Seconds(30)),
              HasSubstr("launchers: hf, plain"));
  std::optional<v1::RegisterRequest> registration = registry.WaitForRegistration(absl::Seconds(30));
  ASSERT_TRUE(registration.has_value()) << worker.Stderr();
  ASSERT_EQ(registration->launchers_size(), 2);
  EXPECT_GT(registration->timing_jitter(), 0) << "measured before registering";
  EXPECT_THAT(worker.Stdout(), HasSubstr("timing jitter: runs of one small CPU kernel vary by"));
  EXPECT_EQ(registration->launchers(0).name(), "hf");
  EXPECT_EQ(registration->launchers(0).format(), "hf-trainer");
  EXPECT_THAT(registration->launchers(0).dimensions(),
              ElementsAre("precision", "micro_batch_size"));
  EXPECT_EQ(registration->launchers(1).name(), "plain");
  ASSERT_EQ(registration->devices_size(), 2);
  EXPECT_EQ(registration->devices(1).type(), "musa");
  EXPECT_EQ(registration->devices(1).name(), "musa:1");
  EXPECT_EQ(registration->devices(1).memory_bytes(), 1073741824);
  EXPECT_THAT(worker.Stdout(), HasSubstr("only launcher trials can run on this worker"));
  // Stopped cleanly, it leaves the pool with its session.
  EXPECT_FALSE(registry.Left().has_value());
  const int status = worker.Signal(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << worker.Stderr();
  std::optional<v1::LeaveRequest> left = registry.Left();
  ASSERT_TRUE(left.has_value()) << worker.Stderr();
  EXPECT_EQ(left->worker_id(), registration->worker_id());
  EXPECT_EQ(left->session_token(), "session-of-" + registration->worker_id());
  coordinator.server->Shutdown();
}

}  // namespace
}  // namespace autoaccel
