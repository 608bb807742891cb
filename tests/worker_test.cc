// The worker's child-process handling, with small shell scripts standing in
// for the trial runner: whatever the child does, the daemon gets a result.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "spec/trial.h"
#include "tests/local_server.h"
#include "tests/subprocess.h"
#include "tests/test_matchers.h"
#include "trial_contract/json_file.h"
#include "worker/accelerators.h"
#include "worker/child_process.h"
#include "worker/device_discovery.h"
#include "worker/file_names.h"
#include "worker/rank_spec.h"
#include "worker/trial_process.h"
#include "worker/worker_flags.h"
#include "worker/worker_service.h"

namespace autoaccel {

namespace {

// A one-layer gpt2 rank: the stand-in runners never build it.
TrialSpec TinySpec() {
  TrialSpec spec;
  spec.model.family = "gpt2";
  spec.model.n_layer = 1;
  spec.model.n_embd = 8;
  spec.model.n_head = 2;
  spec.model.vocab_size = 16;
  spec.model.n_positions = 8;
  spec.model.n_inner = 32;
  spec.seq_len = 4;
  spec.global_batch_size = 1;
  return spec;
}

class TrialProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-worker-");
    spec_ = TinySpec();
    spec_.trial_id = "t1";
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

TEST_F(TrialProcessTest, ASingleRankGetsItsRankButNoRendezvousInItsEnvironment) {
  const char* inherited = std::getenv("MASTER_ADDR");
  const std::optional<std::string> saved =
      inherited ? std::optional<std::string>(inherited) : std::nullopt;
  ::setenv("MASTER_ADDR", "stale-from-the-daemon", 1);
  const std::string seen = dir_ + "/env";
  TrialResult r = RunTrialProcess(
      spec_,
      Runner(absl::StrCat(R"(echo "${RANK-unset} ${WORLD_SIZE-unset} ${LOCAL_RANK-unset} )",
                          R"(${MASTER_ADDR-unset} ${MASTER_PORT-unset}" > )", seen, "\nexit 1")));
  if (saved) {
    ::setenv("MASTER_ADDR", saved->c_str(), 1);
  } else {
    ::unsetenv("MASTER_ADDR");
  }
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_EQ(testing::ReadFile(seen), "0 1 0 unset unset\n");
}

TEST_F(TrialProcessTest, AMissingRunnerIsAFailureNotACrash) {
  TrialProcessOptions options = Runner("exit 0");
  options.runner_path = dir_ + "/no-such-runner";
  TrialResult r = RunTrialProcess(spec_, options);
  EXPECT_EQ(r.status, TrialStatus::kFailed);
}

TEST_F(TrialProcessTest, ARankKilledFromOutsideOrARunnerThatCannotStartIsInfrastructure) {
  TrialResult killed = RunTrialProcess(spec_, Runner("kill -KILL $$"));
  EXPECT_EQ(killed.status, TrialStatus::kFailed);
  EXPECT_TRUE(killed.infrastructure) << killed.error;
  TrialResult terminated = RunTrialProcess(spec_, Runner("kill -TERM $$"));
  EXPECT_TRUE(terminated.infrastructure) << terminated.error;
  TrialProcessOptions missing = Runner("exit 0");
  missing.runner_path = dir_ + "/no-such-runner";
  EXPECT_TRUE(RunTrialProcess(spec_, missing).infrastructure);
  // The trial's own crash or error is the strategy's outcome.
  EXPECT_FALSE(RunTrialProcess(spec_, Runner("kill -SEGV $$")).infrastructure);
  EXPECT_FALSE(RunTrialProcess(spec_, Runner("exit 3")).infrastructure);
}

TEST_F(TrialProcessTest, TheRunnersInfrastructureVerdictReachesTheWorker) {
  TrialResult r = RunTrialProcess(spec_, Runner(R"(cat > "$4" <<'JSON'
{"status": "FAILED", "error": "rendezvous at 127.0.0.1:29500 failed", "infrastructure": true}
JSON)"));
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_TRUE(r.infrastructure);
}

TEST(WatchChildTest, AnExitKeepsItsStatusAndAStopEndsARunningChild) {
  const std::string dir = testing::MakeTempDir("autoaccel-watch-");
  SpawnOptions spawn;
  spawn.stdout_path = spawn.stderr_path = dir + "/log";
  absl::StatusOr<pid_t> pid = SpawnChild({"sh", "-c", "exit 3"}, spawn);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildWatch until_exit;
  until_exit.deadline = absl::Now() + absl::Seconds(30);
  ChildEnd end = WatchChild(*pid, until_exit);
  EXPECT_EQ(end.why, ChildEnd::kExited);
  EXPECT_TRUE(WIFEXITED(end.wait_status) && WEXITSTATUS(end.wait_status) == 3);

  pid = SpawnChild({"sleep", "30"}, spawn);
  ASSERT_TRUE(pid.ok()) << pid.status();
  int polls = 0;
  ChildWatch watch;
  watch.poll_interval = absl::Milliseconds(10);
  watch.stop = [&polls](bool exited) { return !exited && ++polls == 3; };
  const absl::Time start = absl::Now();
  end = WatchChild(*pid, watch);
  EXPECT_EQ(end.why, ChildEnd::kStopped);
  EXPECT_EQ(polls, 3);
  EXPECT_TRUE(WIFSIGNALED(end.wait_status) && WTERMSIG(end.wait_status) == SIGTERM);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "stopped at once, not at the deadline";
  std::filesystem::remove_all(dir);
}

TEST(CheckFileNamePartTest, OnlySafeNamesMayBecomeFileNames) {
  EXPECT_TRUE(CheckFileNamePart("trial_id", "job-20261124-021403-0a1b2c3d4e5f-t0007").ok());
  for (const std::string& bad :
       {std::string(""), std::string("../../etc/x"), std::string("a/b"), std::string(".hidden"),
        std::string("a\0b", 4), std::string(200, 'a'), std::string("t 1")}) {
    absl::Status s = CheckFileNamePart("trial_id", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("trial_id: ")) << bad;
  }
}

// A spec as the coordinator sends it: its own fields, none of the worker's.
v1::RunTrialRequest CoordinatorRequest(const std::string& trial_id, int attempt) {
  TrialSpec spec = TinySpec();
  spec.rank = 1;
  spec.world_size = 2;
  spec.local_rank = 1;
  spec.master_addr = "10.0.0.7";
  spec.master_port = 29501;
  v1::RunTrialRequest request;
  request.set_trial_id(trial_id);
  request.set_attempt(attempt);
  request.set_spec_json(TrialSpecToRequestJson(spec).dump());
  return request;
}

RankDevice CpuRankDevice() {
  RankDevice device;
  device.device.set_type("cpu");
  device.device.set_name("cpu");
  device.device.set_memory_bytes(int64_t{3} << 30);
  *device.device.mutable_peak_tflops() = ToProto(PeakTflops{0.5, 1.25, 0.01});
  device.runner_device = "cpu";
  device.num_threads = 4;
  return device;
}

TEST(RankSpecTest, TheRunnerGetsTheCoordinatorsFieldsAndTheWorkersOwn) {
  absl::StatusOr<TrialSpec> spec =
      RankSpecFromRequest(CoordinatorRequest("job-1-t0003", 2), CpuRankDevice());
  ASSERT_TRUE(spec.ok()) << spec.status();
  // The worker's: from the request and the device.
  EXPECT_EQ(spec->trial_id, "job-1-t0003");
  EXPECT_EQ(spec->attempt, 2);
  EXPECT_EQ(spec->device, "cpu");
  EXPECT_EQ(spec->num_threads, 4);
  EXPECT_EQ(spec->memory_limit_bytes, int64_t{3} << 30);
  EXPECT_EQ(spec->peak_tflops, (PeakTflops{0.5, 1.25, 0.01}));
  // The coordinator's: as sent.
  EXPECT_EQ(spec->rank, 1);
  EXPECT_EQ(spec->world_size, 2);
  EXPECT_EQ(spec->local_rank, 1);
  EXPECT_EQ(spec->master_addr, "10.0.0.7");
  EXPECT_EQ(spec->master_port, 29501);
  EXPECT_EQ(spec->seq_len, 4);
}

TEST(RankSpecTest, ASpecNamingAnotherTrialOrAttemptThanTheRequestIsRefused) {
  // The request's trial_id and attempt are the RPC's identity (attach,
  // cancel, file names); a spec_json that disagrees comes from a confused
  // coordinator and runs nothing.
  v1::RunTrialRequest request = CoordinatorRequest("t1", 2);
  nlohmann::json j = nlohmann::json::parse(request.spec_json());
  j["trial_id"] = "t9";
  request.set_spec_json(j.dump());
  absl::StatusOr<TrialSpec> other_trial = RankSpecFromRequest(request, CpuRankDevice());
  EXPECT_EQ(other_trial.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other_trial.status().message(), HasSubstr("trial_id 't9'"));

  j["trial_id"] = "t1";
  j["attempt"] = 1;
  request.set_spec_json(j.dump());
  absl::StatusOr<TrialSpec> other_attempt = RankSpecFromRequest(request, CpuRankDevice());
  EXPECT_EQ(other_attempt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other_attempt.status().message(), HasSubstr("attempt 1"));

  // Naming the same trial and attempt (a coordinator that sends the whole
  // spec) is accepted; the worker's other fields are replaced.
  j["attempt"] = 2;
  j["device"] = "cuda:7";
  j["num_threads"] = 64;
  j["model_file"] = "/etc/passwd";
  request.set_spec_json(j.dump());
  absl::StatusOr<TrialSpec> same = RankSpecFromRequest(request, CpuRankDevice());
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->device, "cpu");
  EXPECT_EQ(same->num_threads, 4);
  EXPECT_EQ(same->model_file, "");
}

TEST(RankSpecTest, BadIdentityOrSpecIsRefusedNamingTheField) {
  auto refusal = [](const v1::RunTrialRequest& request) {
    return std::string(RankSpecFromRequest(request, CpuRankDevice()).status().message());
  };
  for (const std::string& id : {std::string(""), std::string("../x"), std::string("a/b")}) {
    EXPECT_THAT(refusal(CoordinatorRequest(id, 1)), ::testing::StartsWith("trial_id: ")) << id;
  }
  for (int attempt : {0, -1, kMaxTrialAttempt + 1}) {
    EXPECT_THAT(refusal(CoordinatorRequest("t1", attempt)), ::testing::StartsWith("attempt: "))
        << attempt;
  }
  v1::RunTrialRequest not_json = CoordinatorRequest("t1", 1);
  not_json.set_spec_json("{");
  EXPECT_THAT(refusal(not_json), ::testing::StartsWith("spec_json: "));
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

TEST(ParseRendezvousPortsTest, ReadsARangeAndRejectsBadOnesNamingTheFlag) {
  EXPECT_EQ(ParseRendezvousPorts("29500-29999").value(), std::make_pair(29500, 29999));
  EXPECT_EQ(ParseRendezvousPorts("7000-7000").value(), std::make_pair(7000, 7000));
  for (const char* bad : {"", "29500", "a-b", "0-10", "10-70000", "200-100", "1-2-3", "-5"}) {
    absl::StatusOr<std::pair<int, int>> p = ParseRendezvousPorts(bad);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(p.status().message(), HasSubstr("--rendezvous-ports")) << bad;
  }
}

TEST(AdvertisedAddressTest, AWildcardListenHostBecomesTheHostName) {
  EXPECT_EQ(AdvertisedAddress("127.0.0.1:0", 50052, "", "node7"), "127.0.0.1:50052");
  EXPECT_EQ(AdvertisedAddress("0.0.0.0:50052", 50052, "", "node7"), "node7:50052");
  EXPECT_EQ(AdvertisedAddress("[::]:0", 41000, "", "node7"), "node7:41000");
  EXPECT_EQ(AdvertisedAddress(":50052", 50052, "", "node7"), "node7:50052");
  // An explicit host wins; IPv6 gets its brackets.
  EXPECT_EQ(AdvertisedAddress("0.0.0.0:0", 41000, "10.0.0.7", "node7"), "10.0.0.7:41000");
  EXPECT_EQ(AdvertisedAddress("0.0.0.0:0", 41000, "fd00::7", "node7"), "[fd00::7]:41000");
  EXPECT_EQ(AdvertisedAddress("[fd00::7]:0", 41000, "", "node7"), "[fd00::7]:41000");
}

// A worker registered under a name this host reaches over loopback would
// have its gangs' process groups listen where no other host can dial.
TEST(AdvertisedAddressProblemTest, NamesAnAddressOtherHostsCannotUseForGangs) {
  EXPECT_THAT(AdvertisedAddressProblem("127.0.0.1:50052"), HasSubstr("over loopback"));
  EXPECT_THAT(AdvertisedAddressProblem("localhost:50052"), HasSubstr("over loopback"));
  EXPECT_THAT(AdvertisedAddressProblem("no-such-host.invalid:50052"),
              HasSubstr("no-such-host.invalid does not resolve"));
}

TEST(ParsePeakTflopsTest, ReadsAnyOfThePrecisions) {
  absl::StatusOr<PeakTflops> all = ParsePeakTflops("fp32=1.5,bf16=20,fp16=19.25,fp8=40");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, (PeakTflops{1.5, 20, 19.25, 40}));
  absl::StatusOr<PeakTflops> some = ParsePeakTflops("bf16=989");
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_EQ(*some, (PeakTflops{0, 989, 0}));
}

TEST(ParsePeakTflopsTest, BadTextNamesTheFlag) {
  for (const char* bad : {"", "989", "fp32", "fp32=", "fp32=x", "fp32=-1", "fp32=inf", "tf32=1",
                          "fp32=1,fp32=2", "fp32=1;bf16=2"}) {
    absl::StatusOr<PeakTflops> p = ParsePeakTflops(bad);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(p.status().message(), HasSubstr("--peak-tflops")) << bad;
  }
}

// Stand-in runners and nvidia-smi for the worker's start-up probes.
// What each device's ranks are told to run on.
std::vector<std::string> RunnerDevices(const std::vector<v1::Device>& devices) {
  std::vector<std::string> out;
  for (const v1::Device& d : devices) out.push_back(RunnerDevice(d));
  return out;
}

class DescribeDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-devices-");
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (visible != nullptr) saved_visible_ = visible;
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    options_.work_dir = dir_;
    options_.runner_path = Script("echo 'runner not expected' >&2\nexit 1");
    options_.nvidia_smi = dir_ + "/no-nvidia-smi";
    options_.timeout = absl::Seconds(20);
  }
  void TearDown() override {
    if (saved_visible_) ::setenv("CUDA_VISIBLE_DEVICES", saved_visible_->c_str(), 1);
    std::filesystem::remove_all(dir_);
  }

  std::string Script(const std::string& body) {
    const std::string path = absl::StrCat(dir_, "/script", ++scripts_, ".sh");
    testing::WriteFile(path, "#!/bin/sh\n" + body + "\n");
    ::chmod(path.c_str(), 0755);
    return path;
  }
  // nvidia-smi as on a node of two H100s, the second one a PCIe card.
  std::string FakeNvidiaSmi() {
    return Script(R"(case "$*" in *--query-gpu=index,name,memory.total*) ;; *) exit 9 ;; esac
echo '0, NVIDIA H100 80GB HBM3, 81559'
echo '1, NVIDIA H100 PCIe, 81559')");
  }

  std::string dir_;
  int scripts_ = 0;
  std::optional<std::string> saved_visible_;
  DeviceProbeOptions options_;
};

TEST_F(DescribeDevicesTest, CpuDevicesTakeThePeakTheRunnersProbeMeasures) {
  options_.threads_per_device = 3;
  options_.runner_path = Script(R"(test "$1 $2 $3" = "--probe-peak --threads 3" || exit 9
echo 'loading' >&2
echo '{"bf16": 0.4, "fp16": 0.002, "fp32": 0.1}')");
  auto devices = ParseDevices("cpu:2", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  DescribeDevices(options_, &*devices);
  EXPECT_THAT(RunnerDevices(*devices), ElementsAre("cpu", "cpu"));
  for (const v1::Device& d : *devices) {
    EXPECT_EQ(FromProto(d.peak_tflops()), (PeakTflops{0.1, 0.4, 0.002}));
  }
}

TEST_F(DescribeDevicesTest, AFailedProbeLeavesThePeakUnknownAndTheWorkerStarts) {
  for (const std::string& body : {std::string("echo 'no torch here' >&2\nexit 1"),
                                  std::string("echo 'not json'"), std::string("sleep 30")}) {
    options_.runner_path = Script(body);
    options_.timeout = absl::Seconds(1);
    auto devices = ParseDevices("cpu:1", int64_t{1} << 30);
    ASSERT_TRUE(devices.ok());
    DescribeDevices(options_, &*devices);
    EXPECT_THAT(RunnerDevices(*devices), ElementsAre("cpu")) << body;
    EXPECT_EQ(FromProto((*devices)[0].peak_tflops()), PeakTflops{}) << body;
  }
}

TEST_F(DescribeDevicesTest, AnExplicitPeakIsUsedAndNothingIsProbed) {
  const std::string marker = dir_ + "/probed";
  options_.runner_path = Script(absl::StrCat("touch ", marker, "\nexit 1"));
  options_.nvidia_smi = FakeNvidiaSmi();
  options_.peak = PeakTflops{1, 2, 3};
  for (const char* text : {"cpu:2", "cuda:0"}) {
    auto devices = ParseDevices(text, int64_t{1} << 30);
    ASSERT_TRUE(devices.ok());
    DescribeDevices(options_, &*devices);
    for (const v1::Device& d : *devices) {
      EXPECT_EQ(FromProto(d.peak_tflops()), (PeakTflops{1, 2, 3})) << text;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the CPU probe ran despite --peak-tflops";
}

TEST_F(DescribeDevicesTest, CudaDevicesTakeNameMemoryAndPeakFromNvidiaSmi) {
  options_.nvidia_smi = FakeNvidiaSmi();
  auto devices = ParseDevices("cuda:1,0", 0);
  ASSERT_TRUE(devices.ok());
  DescribeDevices(options_, &*devices);
  EXPECT_THAT(RunnerDevices(*devices), ElementsAre("cuda:1", "cuda:0"));
  EXPECT_EQ((*devices)[0].name(), "NVIDIA H100 PCIe");
  EXPECT_EQ((*devices)[0].memory_bytes(), int64_t{81559} << 20);
  EXPECT_EQ(FromProto((*devices)[0].peak_tflops()), (PeakTflops{51, 756, 756, 1513}));
  EXPECT_EQ((*devices)[1].name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(FromProto((*devices)[1].peak_tflops()), (PeakTflops{67, 989, 989, 1979}));

  // --device-memory given: it stands. CUDA_VISIBLE_DEVICES renumbers.
  options_.keep_memory = true;
  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  devices = ParseDevices("cuda:0", int64_t{40} << 30);
  ASSERT_TRUE(devices.ok());
  DescribeDevices(options_, &*devices);
  EXPECT_THAT(RunnerDevices(*devices), ElementsAre("cuda:0"));
  EXPECT_EQ((*devices)[0].name(), "NVIDIA H100 PCIe");
  EXPECT_EQ((*devices)[0].memory_bytes(), int64_t{40} << 30);
}

TEST_F(DescribeDevicesTest, WithoutNvidiaSmiCudaDevicesStayAsTheyWere) {
  for (const std::string& smi :
       {dir_ + "/no-such-file", std::string("no-such-nvidia-smi"),
        Script("echo 'NVIDIA-SMI has failed' >&2\nexit 9"), Script("echo 'garbage'")}) {
    options_.nvidia_smi = smi;
    auto devices = ParseDevices("cuda:0", 0);
    ASSERT_TRUE(devices.ok());
    DescribeDevices(options_, &*devices);
    EXPECT_THAT(RunnerDevices(*devices), ElementsAre("cuda:0")) << smi;
    EXPECT_EQ((*devices)[0].name(), "cuda:0") << smi;
    EXPECT_EQ((*devices)[0].memory_bytes(), 0) << smi;
    EXPECT_EQ(FromProto((*devices)[0].peak_tflops()), PeakTflops{}) << smi;
  }
}

// RunTrial end to end through gRPC, with a runner that keeps the spec it got.
class WorkerServiceTest : public DescribeDevicesTest {
 protected:
  // `runner`: the stand-in trial runner's path; "" for one that keeps the
  // spec it got and succeeds.
  void Start(std::vector<v1::Device> devices, std::string runner = "") {
    WorkerOptions options;
    options.runner_path =
        !runner.empty() ? runner : Script(absl::StrCat(R"(cp "$2" )", dir_, R"(/seen-spec.json
cat > "$4" <<'JSON'
{"status": "SUCCEEDED", "error": "", "metrics": {"tokens_per_second": 1}}
JSON)"));
    options.work_dir = dir_;
    options.devices = std::move(devices);
    service_ = std::make_unique<WorkerServiceImpl>(options);
    service_->gate()->Accept(testing::kTestSessionToken);
    testing::LocalServer local = testing::ServeLocally(service_.get(), testing::kTestSessionToken);
    server_ = std::move(local.server);
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(local.port, 0);
    port_ = local.port;
    stub_ = v1::WorkerService::NewStub(local.channel);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    if (service_) service_->Shutdown();
    DescribeDevicesTest::TearDown();
  }

  // Attempt 1 of `trial_id`: `spec` on device 0.
  static v1::RunTrialRequest RequestFor(const std::string& trial_id, const TrialSpec& spec) {
    v1::RunTrialRequest req;
    req.set_trial_id(trial_id);
    req.set_attempt(1);
    req.set_device_index(0);
    req.set_spec_json(TrialSpecToRequestJson(spec).dump());
    req.set_timeout_seconds(20);
    return req;
  }

  // Runs `spec` on device 0; returns the spec the runner was given.
  TrialSpec RunAndReadSpec(const TrialSpec& spec) {
    v1::RunTrialRequest req;
    req.set_trial_id("t1");
    req.set_attempt(++attempts_);
    req.set_device_index(0);
    req.set_spec_json(TrialSpecToRequestJson(spec).dump());
    req.set_timeout_seconds(20);
    v1::RunTrialResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Status s = stub_->RunTrial(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.status(), v1::TRIAL_STATUS_SUCCEEDED) << resp.reason();
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(dir_ + "/seen-spec.json");
    EXPECT_TRUE(j.ok()) << j.status();
    absl::StatusOr<TrialSpec> seen = j.ok() ? TrialSpecFromJson(*j) : j.status();
    EXPECT_TRUE(seen.ok()) << seen.status();
    return seen.ok() ? *seen : TrialSpec{};
  }

  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  int port_ = 0;
  int attempts_ = 0;
};

TEST_F(WorkerServiceTest, TrialIdsAndDigestsThatCouldNameOtherPathsAreRefused) {
  auto devices = ParseDevices("cpu:1", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  Start(*devices);
  auto run = [&](const std::string& trial_id, const TrialSpec& spec,
                 const std::string& model_file = "") {
    v1::RunTrialRequest req;
    req.set_trial_id(trial_id);
    req.set_attempt(1);
    req.set_spec_json(TrialSpecToRequestJson(spec).dump());
    req.set_model_file(model_file);
    v1::RunTrialResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->RunTrial(&ctx, req, &resp);
  };
  for (const std::string& id : {std::string("../../escape"), std::string("a\0/etc/passwd", 14)}) {
    grpc::Status s = run(id, TinySpec());
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
    EXPECT_THAT(s.error_message(), HasSubstr("trial_id")) << id;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/../escape-a1-r0.spec.json"));
  TrialSpec scripted = TinySpec();
  scripted.model = ModelSpec();
  scripted.model.family = "torchscript";
  scripted.model.input_spec = "input_ids:int64[B,T]<16";
  scripted.model.script_digest = "sha256:../../model";
  scripted.model.script_bytes = 3;
  scripted.model.n_positions = ModelSpec::kTorchScriptMaxSeqLen;
  grpc::Status s = run("t1", scripted, "abc");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("script_digest"));
  // A deeply nested spec is refused, not parsed.
  v1::RunTrialRequest deep;
  deep.set_trial_id("t2");
  deep.set_attempt(1);
  deep.set_spec_json(std::string(100000, '[') + std::string(100000, ']'));
  v1::RunTrialResponse resp;
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->RunTrial(&ctx, deep, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A string that is not UTF-8 is named (gRPC's own answer was UNIMPLEMENTED).
  v1::RunTrialRequest garbled = RequestFor("t3", TinySpec());
  garbled.set_trial_id("t3\xff");
  grpc::ClientContext garbled_ctx;
  grpc::Status s2 = stub_->RunTrial(&garbled_ctx, garbled, &resp);
  EXPECT_EQ(s2.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s2.error_message(), HasSubstr("trial_id: not valid UTF-8"));
  v1::CancelTrialRequest cancel;
  cancel.set_trial_id("t3\xff");
  v1::CancelTrialResponse cancelled;
  grpc::ClientContext cancel_ctx;
  grpc::Status s3 = stub_->CancelTrial(&cancel_ctx, cancel, &cancelled);
  EXPECT_EQ(s3.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s3.error_message(), HasSubstr("trial_id: not valid UTF-8"));
  // A spec that is JSON but no spec names the request's field.
  v1::RunTrialRequest listed = RequestFor("t4", TinySpec());
  listed.set_spec_json("[1, 2]");
  grpc::ClientContext listed_ctx;
  grpc::Status s4 = stub_->RunTrial(&listed_ctx, listed, &resp);
  EXPECT_EQ(s4.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s4.error_message(), ::testing::StartsWith("spec_json: "));
}

TEST_F(WorkerServiceTest, ATrialFasterThanTheProbedPeakRaisesItAndTheCoordinatorHears) {
  auto devices = ParseDevices("cpu:2", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  for (v1::Device& d : *devices) *d.mutable_peak_tflops() = ToProto(PeakTflops{1.0, 2.0, 0.5});
  WorkerOptions options;
  options.runner_path = Script(R"(cat > "$4" <<'JSON'
{"status": "SUCCEEDED", "error": "", "metrics": {"tokens_per_second": 10, "step_time_median_s": 0.1,
 "achieved_tflops": 3.0, "peak_tflops": 2.0, "mfu": 1.5}}
JSON)");
  options.work_dir = dir_;
  options.devices = *devices;
  options.cpu_peaks_measured = true;
  std::vector<v1::Device> announced;
  options.on_devices_changed = [&](const std::vector<v1::Device>& d) { announced = d; };
  service_ = std::make_unique<WorkerServiceImpl>(options);
  service_->gate()->Accept(testing::kTestSessionToken);
  testing::LocalServer local = testing::ServeLocally(service_.get(), testing::kTestSessionToken);
  server_ = std::move(local.server);
  ASSERT_NE(local.port, 0);
  stub_ = v1::WorkerService::NewStub(local.channel);
  TrialSpec spec = TinySpec();
  spec.strategy.precision = Precision::kBf16;
  v1::RunTrialRequest req;
  req.set_trial_id("t1");
  req.set_attempt(1);
  req.set_spec_json(TrialSpecToRequestJson(spec).dump());
  v1::RunTrialResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->RunTrial(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.status(), v1::TRIAL_STATUS_SUCCEEDED);
  EXPECT_DOUBLE_EQ(resp.metrics().mfu(), 1.0) << "restated against the raised peak";
  EXPECT_DOUBLE_EQ(resp.metrics().peak_tflops(), 3.0);
  ASSERT_EQ(announced.size(), 2u);
  for (const v1::Device& d : announced) {
    EXPECT_EQ(FromProto(d.peak_tflops()), (PeakTflops{1.0, 3.0, 0.5})) << "every cpu device";
  }
}

TEST_F(WorkerServiceTest, TheRunnerGetsTheDevicesPeakUnlessTheSpecBringsOne) {
  options_.peak = PeakTflops{0.5, 1.25, 0.01};  // as --peak-tflops fp32=0.5,bf16=1.25,fp16=0.01
  auto devices = ParseDevices("cpu:1", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  DescribeDevices(options_, &*devices);
  Start(*devices);

  TrialSpec seen = RunAndReadSpec(TinySpec());
  EXPECT_EQ(seen.peak_tflops, (PeakTflops{0.5, 1.25, 0.01}));
  EXPECT_EQ(seen.device, "cpu");

  TrialSpec own = TinySpec();
  own.peak_tflops.bf16 = 7;
  EXPECT_EQ(RunAndReadSpec(own).peak_tflops, (PeakTflops{0, 7, 0}));
}

TEST_F(WorkerServiceTest, AGpuNamedAfterItsModelStillRunsOnItsOrdinal) {
  options_.nvidia_smi = FakeNvidiaSmi();
  auto devices = ParseDevices("cuda:1", 0);
  ASSERT_TRUE(devices.ok());
  DescribeDevices(options_, &*devices);
  Start(*devices);

  TrialSpec seen = RunAndReadSpec(TinySpec());
  EXPECT_EQ(seen.device, "cuda:1");
  EXPECT_EQ(seen.memory_limit_bytes, int64_t{81559} << 20);
  EXPECT_EQ(seen.peak_tflops, (PeakTflops{51, 756, 756, 1513}));
}

TEST_F(WorkerServiceTest, TwoRanksOfATrialRunSideBySideAndOneCancelStopsBoth) {
  // Each rank records its environment and pid, leaves a grandchild behind
  // that would outlive a sloppy stop, and runs until stopped.
  const std::string runner = Script(absl::StrCat(
      "env | grep -E '^(RANK|WORLD_SIZE|LOCAL_RANK|MASTER_ADDR|MASTER_PORT)=' | sort > ", dir_,
      "/env-$RANK\n", "(sleep 2; touch ", dir_, "/survived-$RANK) &\n", "echo $$ > ", dir_,
      "/started-$RANK\n", "sleep 30"));
  auto devices = ParseDevices("cpu:2", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  Start(*devices, runner);

  std::vector<v1::RunTrialResponse> responses(2);
  std::vector<grpc::Status> statuses(2);
  std::vector<std::thread> calls;
  const absl::Time start = absl::Now();
  for (int rank = 0; rank < 2; ++rank) {
    calls.emplace_back([&, rank] {
      TrialSpec spec = TinySpec();
      spec.rank = rank;
      spec.world_size = 2;
      spec.local_rank = rank;
      spec.master_addr = "127.0.0.1";
      spec.master_port = 29517;
      v1::RunTrialRequest req;
      req.set_trial_id("t1");
      req.set_attempt(1);
      req.set_device_index(rank);
      req.set_spec_json(TrialSpecToRequestJson(spec).dump());
      req.set_timeout_seconds(30);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
      statuses[rank] = stub_->RunTrial(&ctx, req, &responses[rank]);
    });
  }
  const auto started = [&](int rank) {
    return std::filesystem::exists(absl::StrCat(dir_, "/started-", rank));
  };
  for (int i = 0; i < 100 && !(started(0) && started(1)); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(started(0) && started(1)) << "both ranks run at once";
  EXPECT_NE(testing::ReadFile(dir_ + "/started-0"), testing::ReadFile(dir_ + "/started-1"))
      << "one child per rank";
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(testing::ReadFile(absl::StrCat(dir_, "/env-", rank)),
              absl::StrCat("LOCAL_RANK=", rank, "\nMASTER_ADDR=127.0.0.1\nMASTER_PORT=29517\nRANK=",
                           rank, "\nWORLD_SIZE=2\n"));
    EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir_, "/t1-a1-r", rank, "/spec.json")))
        << "each rank has its own work files";
  }

  v1::CancelTrialRequest cancel;
  cancel.set_trial_id("t1");
  cancel.set_attempt(1);
  v1::CancelTrialResponse cancelled;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(stub_->CancelTrial(&ctx, cancel, &cancelled).ok());
  for (std::thread& t : calls) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << statuses[rank].error_message();
    EXPECT_EQ(responses[rank].status(), v1::TRIAL_STATUS_CANCELLED) << "rank " << rank;
  }
  absl::SleepFor(absl::Milliseconds(2500));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_FALSE(std::filesystem::exists(absl::StrCat(dir_, "/survived-", rank)))
        << "a process of rank " << rank << " outlived the cancel";
  }
}

// A coordinator that dies (here: its call gives up) leaves the rank running;
// the worker lists it for its next registration, an attach-only call for a
// rank it does not have is NOT_FOUND, and once the rank has ended its answer
// waits for the coordinator's attach-only call, which collects it.
TEST_F(WorkerServiceTest, ARankWhoseCoordinatorWentAwayRunsOnAndItsAnswerWaitsForAnAttach) {
  auto devices = ParseDevices("cpu:1", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  Start(*devices, Script(R"(sleep 1.5
cat > "$4" <<'JSON'
{"status": "SUCCEEDED", "error": "", "metrics": {"tokens_per_second": 42}}
JSON)"));
  TrialSpec rank0 = TinySpec();  // rank 0 of a gang of two: it serves the rendezvous
  rank0.world_size = 2;
  rank0.master_addr = "127.0.0.1";
  rank0.master_port = 29555;
  const v1::RunTrialRequest req = RequestFor("t9", rank0);
  {
    v1::RunTrialResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    EXPECT_EQ(stub_->RunTrial(&ctx, req, &resp).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  std::vector<v1::RunningRank> ranks = service_->RunningRanks();
  ASSERT_EQ(ranks.size(), 1u) << "still running";
  EXPECT_EQ(ranks[0].trial_id(), "t9");
  EXPECT_EQ(ranks[0].attempt(), 1);
  EXPECT_EQ(ranks[0].device_index(), 0);
  EXPECT_FALSE(ranks[0].finished());
  EXPECT_EQ(ranks[0].rendezvous_port(), 29555) << "the coordinator holds it again";

  v1::RunTrialRequest attach = req;
  attach.set_attach_only(true);
  attach.set_trial_id("t8");
  {
    v1::RunTrialResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = stub_->RunTrial(&ctx, attach, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  for (int i = 0; i < 50 && !(ranks = service_->RunningRanks()).empty() && !ranks[0].finished();
       ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_TRUE(ranks[0].finished()) << "ended, its answer kept";
  EXPECT_EQ(ranks[0].rendezvous_port(), 0) << "an ended rank serves no rendezvous";
  attach.set_trial_id("t9");
  v1::RunTrialResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status s = stub_->RunTrial(&ctx, attach, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.status(), v1::TRIAL_STATUS_SUCCEEDED) << resp.reason();
  EXPECT_EQ(resp.metrics().tokens_per_second(), 42);
  EXPECT_TRUE(service_->RunningRanks().empty()) << "collected once";
}

// Only the coordinator that registered the worker may run or cancel trials
// there: a call without its session token, or with another, is refused
// before anything runs, and one device runs one rank at a time.
TEST_F(WorkerServiceTest, OnlyTheCoordinatorsSessionTokenRunsTrialsOneRankPerDevice) {
  auto devices = ParseDevices("cpu:1", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  Start(*devices, Script(R"(sleep 2
cat > "$4" <<'JSON'
{"status": "SUCCEEDED", "error": "", "metrics": {"tokens_per_second": 1}}
JSON)"));
  std::shared_ptr<grpc::Channel> plain = CreateClientChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), "");
  std::shared_ptr<grpc::Channel> forged = CreateClientChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), "guessed-token-xyz");
  for (const auto& channel : {plain, forged}) {
    auto stub = v1::WorkerService::NewStub(channel);
    grpc::ClientContext run_ctx, cancel_ctx;
    v1::RunTrialResponse resp;
    EXPECT_EQ(stub->RunTrial(&run_ctx, RequestFor("t1", TinySpec()), &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::CancelTrialRequest cancel;
    cancel.set_trial_id("t1");
    cancel.set_attempt(1);
    v1::CancelTrialResponse cancelled;
    EXPECT_EQ(stub->CancelTrial(&cancel_ctx, cancel, &cancelled).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }

  // With the token: the first rank runs; a second trial on its device is refused.
  std::thread first([&] {
    grpc::ClientContext ctx;
    v1::RunTrialResponse resp;
    EXPECT_TRUE(stub_->RunTrial(&ctx, RequestFor("t1", TinySpec()), &resp).ok());
    EXPECT_EQ(resp.status(), v1::TRIAL_STATUS_SUCCEEDED);
  });
  absl::SleepFor(absl::Milliseconds(500));
  grpc::ClientContext ctx;
  v1::RunTrialResponse resp;
  grpc::Status busy = stub_->RunTrial(&ctx, RequestFor("t-other", TinySpec()), &resp);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(busy.error_message(), HasSubstr("one rank per device"));
  first.join();
}

// A coordinator sends a trial (or re-attaches one after its restart) as soon
// as it has answered a registration, before the worker has read its new
// session token: while a registration is under way such a call waits for
// it instead of being refused.
TEST_F(WorkerServiceTest, ACallWithTheNextSessionTokenWaitsForTheRegistrationUnderWay) {
  auto devices = ParseDevices("cpu:1", int64_t{1} << 30);
  ASSERT_TRUE(devices.ok());
  Start(*devices, Script(R"(cat > "$4" <<'JSON'
{"status": "SUCCEEDED", "error": "", "metrics": {"tokens_per_second": 1}}
JSON)"));
  const std::string next = "next-session-token-0123456789";
  auto next_stub = v1::WorkerService::NewStub(CreateClientChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), next));
  service_->gate()->RegistrationStarted();
  std::thread registrar([&] {
    absl::SleepFor(absl::Milliseconds(300));
    service_->gate()->Accept(next);
  });
  grpc::ClientContext ctx;
  v1::RunTrialResponse resp;
  grpc::Status s = next_stub->RunTrial(&ctx, RequestFor("t1", TinySpec()), &resp);
  registrar.join();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.status(), v1::TRIAL_STATUS_SUCCEEDED);

  // A registration that fails refuses the waiting call with the token it had.
  service_->gate()->RegistrationStarted();
  std::thread failed([&] {
    absl::SleepFor(absl::Milliseconds(300));
    service_->gate()->RegistrationFailed();
  });
  auto old_stub = v1::WorkerService::NewStub(CreateClientChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), "another-token-xyz"));
  grpc::ClientContext refused_ctx;
  const absl::Time asked = absl::Now();
  EXPECT_EQ(old_stub->RunTrial(&refused_ctx, RequestFor("t2", TinySpec()), &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_LT(absl::Now() - asked, kRegistrationWait) << "refused once the registration failed";
  failed.join();
}

}  // namespace
}  // namespace autoaccel
