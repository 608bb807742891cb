// Launcher trials with real scripts: small standard-library Python programs
// (written by the tests) run as trial ranks through RunLauncherRank and
// through the worker's gRPC service, each behaving as a user's script
// might — well, or badly — and the rank ends as the contract says.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_server.h"
#include "tests/model_test_util.h"
#include "tests/subprocess.h"
#include "trial_contract/json_file.h"
#include "worker/launcher_trial.h"
#include "worker/worker_flags.h"
#include "worker/worker_service.h"

namespace autoaccel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A user's script in miniature: argv[1] says how it behaves. It reports
// steps of 10 ms (step_time_s 0.01 * step) through the metrics protocol.
constexpr const char* kScript = R"PY(
import json, os, signal, sys, time
mode = sys.argv[1]
metrics = os.environ["AUTOACCEL_METRICS_FILE"]
wanted = int(os.environ["AUTOACCEL_WARMUP_STEPS"]) + int(os.environ["AUTOACCEL_MEASURED_STEPS"])

def report(**event):
    with open(metrics, "a") as f:
        f.write(json.dumps(event) + "\n")

def steps(n):
    for i in range(1, n + 1):
        time.sleep(0.01)
        report(event="step", step=i, step_time_s=0.01 * i, tokens=64, samples=8, loss=10.0 / i)

def forever():
    while True:
        time.sleep(0.05)

if mode == "env":
    with open(os.path.join(os.environ["AUTOACCEL_TRIAL_DIR"], "seen.json"), "w") as f:
        json.dump({"env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd()}, f)
    steps(wanted)
elif mode == "forever":
    report(event="model", parameters=1000)
    steps(wanted)
    forever()
elif mode == "ignore_term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    steps(wanted)
    forever()
elif mode == "exit_after":
    steps(wanted)
elif mode == "early":
    steps(2)
    print("Traceback (most recent call last):\nValueError: boom", file=sys.stderr)
    sys.exit(1)
elif mode == "hang":
    print("loading the model...", file=sys.stderr, flush=True)
    steps(2)
    forever()
elif mode == "garbage":
    steps(1)
    with open(metrics, "a") as f:
        f.write("step 2 took 0.1s\n")
    forever()
elif mode == "partial":
    steps(wanted - 1)
    with open(metrics, "a") as f:
        f.write('{"event": "step", "step": 7, "step_ti')
elif mode == "silent":
    pass
elif mode == "oom_event":
    steps(1)
    report(event="oom", message="CUDA out of memory. Tried to allocate 2.00 GiB")
    forever()
elif mode == "oom_stderr":
    steps(1)
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
          file=sys.stderr)
    sys.exit(1)
elif mode == "rss":
    hog = bytearray(200 << 20)
    for i in range(0, len(hog), 4096):
        hog[i] = 1
    forever()
elif mode == "rss_children":
    import subprocess
    hog = "h = bytearray(40 << 20)\nfor i in range(0, len(h), 4096): h[i] = 1\nimport time\ntime.sleep(60)"
    children = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(3)]
    forever()
elif mode == "segv":
    steps(1)
    os.kill(os.getpid(), signal.SIGSEGV)
elif mode == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
)PY";

std::string Python() {
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

TrialSpec Spec(const std::string& strategy, int global_batch_size) {
  TrialSpec spec;
  spec.trial_id = "job-1-t0001";
  spec.attempt = 1;
  spec.model = testing::TinyModelSpec("llama");
  spec.seq_len = 8;
  spec.global_batch_size = global_batch_size;
  absl::StatusOr<Strategy> s = ParseStrategyText(strategy);
  EXPECT_TRUE(s.ok()) << s.status();
  spec.strategy = *s;
  spec.world_size = spec.strategy.world_size();
  spec.warmup_steps = 2;
  spec.measured_steps = 5;
  spec.num_threads = 3;
  return spec;
}

constexpr const char* kOneRank =
    "precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none,mbs=2,ga=1";
constexpr const char* kTwoRanksFsdp =
    "dp=2,tp=1,pp=1,sharding=fsdp,mbs=2,ga=1,precision=bf16,checkpoint=full,attention=sdpa,"
    "optimizer=adamw,offload=none";

class LauncherRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("autoaccel-launcher-");
    script_ = dir_ + "/train.py";
    testing::WriteFile(script_, kScript);
    options_.work_dir = dir_ + "/work";
    std::filesystem::create_directories(options_.work_dir);
    options_.python = Python();
    options_.timeout = absl::Seconds(20);
    options_.grace = absl::Seconds(2);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LauncherRank Rank(const std::string& mode) {
    LauncherRank rank;
    rank.spec = Spec(kOneRank, 2);
    rank.launcher.name = "py";
    rank.launcher.argv = {"{python}", script_, mode};
    return rank;
  }

  TrialResult Run(const std::string& mode) { return RunLauncherRank(Rank(mode), options_); }

  nlohmann::json Seen(const LauncherRank& rank) {
    absl::StatusOr<nlohmann::json> j =
        ReadJsonFile(LauncherTrialDir(rank, options_.work_dir) + "/seen.json");
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : nlohmann::json::object();
  }

  std::string dir_;
  std::string script_;
  LauncherTrialOptions options_;
};

TEST_F(LauncherRankTest, AScriptThatKeepsTrainingIsStoppedOnceItReportedItsStepsAndSucceeds) {
  const absl::Time start = absl::Now();
  TrialResult r = Run("forever");
  EXPECT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // Steps 3..7 are measured: 0.03 .. 0.07 s, 64 tokens each.
  EXPECT_EQ(r.metrics.measured_steps, 5);
  EXPECT_DOUBLE_EQ(r.metrics.step_time_median_s, 0.05);
  EXPECT_DOUBLE_EQ(r.metrics.step_time_min_s, 0.03);
  EXPECT_DOUBLE_EQ(r.metrics.step_time_max_s, 0.07);
  EXPECT_DOUBLE_EQ(r.metrics.tokens_per_second, 64 / 0.05);
  EXPECT_DOUBLE_EQ(r.metrics.samples_per_second, 8 / 0.05);
  EXPECT_DOUBLE_EQ(r.metrics.final_loss, 10.0 / 7);
  EXPECT_EQ(r.step_losses.size(), 7u);
  EXPECT_GT(r.metrics.peak_rss_bytes, 1 << 20) << "the python process's RSS was measured";
  EXPECT_EQ(r.metrics.peak_memory_bytes, r.metrics.peak_rss_bytes);
  // The job gave a model config: its FLOPs per token count, not the model event's.
  const double flops = Spec(kOneRank, 2).model.TrainingFlopsPerToken(8);
  EXPECT_DOUBLE_EQ(r.metrics.achieved_tflops, flops * (64 / 0.05) / 1e12);
}

TEST_F(LauncherRankTest, AScriptThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  options_.grace = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  TrialResult r = Run("ignore_term");
  EXPECT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST_F(LauncherRankTest, AScriptThatExitsByItselfAfterItsStepsSucceeds) {
  TrialResult r = Run("exit_after");
  EXPECT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  EXPECT_EQ(r.metrics.measured_steps, 5);
}

TEST_F(LauncherRankTest, AnEarlyExitFailsWithTheStepCountAndTheEndOfStderr) {
  TrialResult r = Run("early");
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_FALSE(r.infrastructure);
  EXPECT_THAT(r.error, HasSubstr("script exited with code 1 after 2 of 7 steps; stderr:\n"));
  EXPECT_THAT(r.error, HasSubstr("ValueError: boom"));
}

TEST_F(LauncherRankTest, AHangingScriptTimesOutWithWhatItReported) {
  options_.timeout = absl::Seconds(1);
  const absl::Time start = absl::Now();
  TrialResult r = Run("hang");
  EXPECT_EQ(r.status, TrialStatus::kTimeout);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_THAT(r.error, HasSubstr("reported 2 of 7 steps"));
  EXPECT_THAT(r.error, HasSubstr("loading the model..."));
}

TEST_F(LauncherRankTest, AGarbageMetricsLineStopsTheRankAndFailsNamingTheLine) {
  const absl::Time start = absl::Now();
  TrialResult r = Run("garbage");
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_EQ(r.error, "metrics file line 2: not JSON: step 2 took 0.1s");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(LauncherRankTest, AnUnfinishedLastLineIsNotReadAndTheStepsAreShort) {
  TrialResult r = Run("partial");
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_THAT(r.error, HasSubstr("script exited with code 0 after 6 of 7 steps"));
}

TEST_F(LauncherRankTest, AScriptThatNeverReportsFails) {
  TrialResult r = Run("silent");
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_FALSE(r.infrastructure);
  EXPECT_THAT(r.error, HasSubstr("script exited with code 0 after 0 of 7 steps"));
}

TEST_F(LauncherRankTest, AnOomEventOrAnOomOnStderrIsOom) {
  TrialResult event = Run("oom_event");
  EXPECT_EQ(event.status, TrialStatus::kOom);
  EXPECT_EQ(event.error, "CUDA out of memory. Tried to allocate 2.00 GiB");
  TrialResult stderr_oom = Run("oom_stderr");
  EXPECT_EQ(stderr_oom.status, TrialStatus::kOom);
  EXPECT_THAT(stderr_oom.error, HasSubstr("torch.OutOfMemoryError: CUDA out of memory"));
}

TEST_F(LauncherRankTest, ProcessesAboveTheCpuDevicesMemoryAreStoppedAsOom) {
  LauncherRank rank = Rank("rss");
  rank.spec.memory_limit_bytes = 64 << 20;
  const absl::Time start = absl::Now();
  TrialResult r = RunLauncherRank(rank, options_);
  EXPECT_EQ(r.status, TrialStatus::kOom) << r.error;
  EXPECT_THAT(r.error, HasSubstr("the script's processes used "));
  EXPECT_THAT(r.error, HasSubstr("more than the device's 64.0 MiB"));
  EXPECT_GT(r.metrics.peak_rss_bytes, 64 << 20);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(LauncherRankTest, TheMemoryOfEveryProcessTheScriptStartedCounts) {
  // Three children of 40 MiB each: none alone is above 64 MiB, together they are.
  LauncherRank rank = Rank("rss_children");
  rank.spec.memory_limit_bytes = 64 << 20;
  const absl::Time start = absl::Now();
  TrialResult r = RunLauncherRank(rank, options_);
  EXPECT_EQ(r.status, TrialStatus::kOom) << r.error;
  EXPECT_THAT(r.error, HasSubstr("more than the device's 64.0 MiB"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(LauncherRankTest, ACrashIsTheScriptsAndAKillFromOutsideIsInfrastructure) {
  TrialResult segv = Run("segv");
  EXPECT_EQ(segv.status, TrialStatus::kFailed);
  EXPECT_FALSE(segv.infrastructure);
  EXPECT_THAT(segv.error, HasSubstr("script was killed by signal 11 (Segmentation fault) after 1 "
                                    "of 7 steps"));
  TrialResult killed = Run("killed");
  EXPECT_EQ(killed.status, TrialStatus::kFailed);
  EXPECT_TRUE(killed.infrastructure);
  LauncherRank missing = Rank("forever");
  missing.launcher.argv = {dir_ + "/no-such-python", script_};
  TrialResult r = RunLauncherRank(missing, options_);
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_TRUE(r.infrastructure);
  EXPECT_THAT(r.error, HasSubstr("cannot start launcher 'py'"));
  EXPECT_THAT(r.error, HasSubstr("No such file"));
}

TEST_F(LauncherRankTest, CancelStopsTheRank) {
  std::atomic<bool> cancel{false};
  options_.should_cancel = [&] { return cancel.load(); };
  std::thread([&] {
    absl::SleepFor(absl::Milliseconds(300));
    cancel = true;
  }).detach();
  const absl::Time start = absl::Now();
  TrialResult r = Run("hang");
  EXPECT_EQ(r.status, TrialStatus::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

// A musa worker's rank 1 of a two-rank FSDP trial in the hf-trainer format:
// the environment, argv, working directory and files the script sees.
TEST_F(LauncherRankTest, TheScriptSeesTheContractsEnvironmentArgvAndFiles) {
  // The worker itself sees physical devices 10..17: ordinals 4 and 6 are 14 and 16.
  ::setenv("MUSA_VISIBLE_DEVICES", "10,11,12,13,14,15,16,17", 1);
  LauncherRank rank;
  rank.spec = Spec(kTwoRanksFsdp, 4);
  rank.spec.rank = 1;
  rank.spec.local_rank = 1;
  rank.spec.master_addr = "10.0.0.7";
  rank.spec.master_port = 29517;
  rank.spec.local_world_size = 2;
  rank.spec.group_rank = 0;
  rank.spec.local_device_indices = {4, 6};
  rank.device_type = "musa";
  rank.device_ordinals = {4, 6};
  rank.launcher.name = "hf";
  rank.launcher.format = "hf-trainer";
  rank.launcher.workdir = dir_;
  rank.launcher.env = {{"TOKENIZERS_PARALLELISM", "false"}};
  rank.launcher.argv = {
      "{python}",      script_,           "env",           "--mbs={micro_batch_size}",
      "--{precision}", "{strategy_file}", "{fsdp_config}", "{*training_args}"};
  TrialResult r = RunLauncherRank(rank, options_);
  ::unsetenv("MUSA_VISIBLE_DEVICES");
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;

  const std::string trial_dir = options_.work_dir + "/job-1-t0001-a1-r1";
  const nlohmann::json seen = Seen(rank);
  const nlohmann::json& env = seen["env"];
  const std::map<std::string, std::string> expected = {
      {"RANK", "1"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "2"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "0"},
      {"ROLE_RANK", "1"},
      {"ROLE_WORLD_SIZE", "2"},
      {"MASTER_ADDR", "10.0.0.7"},
      {"MASTER_PORT", "29517"},
      {"AUTOACCEL_STRATEGY_FILE", trial_dir + "/strategy.json"},
      {"AUTOACCEL_TRIAL_DIR", trial_dir},
      {"AUTOACCEL_METRICS_FILE", trial_dir + "/metrics.jsonl"},
      {"AUTOACCEL_WARMUP_STEPS", "2"},
      {"AUTOACCEL_MEASURED_STEPS", "5"},
      {"AUTOACCEL_TRIAL_ID", "job-1-t0001"},
      {"AUTOACCEL_DEVICE_TYPE", "musa"},
      {"MUSA_VISIBLE_DEVICES", "14,16"},  // LOCAL_RANK 1 indexes device 16
      {"TOKENIZERS_PARALLELISM", "false"}};
  for (const auto& [name, value] : expected) {
    ASSERT_TRUE(env.contains(name)) << name;
    EXPECT_EQ(env[name], value) << name;
  }
  EXPECT_FALSE(env.contains("OMP_NUM_THREADS") && env["OMP_NUM_THREADS"] == "3")
      << "OMP_NUM_THREADS is for cpu devices";
  EXPECT_EQ(seen["cwd"], dir_);

  // argv: placeholders inside tokens, file paths, and training_args.txt's lines.
  std::vector<std::string> argv = seen["argv"];
  ASSERT_GE(argv.size(), 7u);
  EXPECT_EQ(argv[2], "--mbs=2");
  EXPECT_EQ(argv[3], "--bf16");
  EXPECT_EQ(argv[4], trial_dir + "/strategy.json");
  EXPECT_EQ(argv[5], trial_dir + "/fsdp_config.json");
  const std::vector<std::string> args(argv.begin() + 6, argv.end());
  EXPECT_THAT(args, ::testing::Contains("--per_device_train_batch_size=2"));
  EXPECT_THAT(args, ::testing::Contains("--fsdp_config=" + trial_dir + "/fsdp_config.json"));
  for (const std::string& a : args) EXPECT_THAT(a, Not(HasSubstr(" ")));

  // strategy.json and the exported files in the trial directory.
  absl::StatusOr<nlohmann::json> strategy = ReadJsonFile(trial_dir + "/strategy.json");
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  EXPECT_EQ((*strategy)["rank"], 1);
  EXPECT_EQ((*strategy)["world_size"], 2);
  EXPECT_EQ((*strategy)["global_batch_size"], 4);
  EXPECT_EQ((*strategy)["device_type"], "musa");
  EXPECT_EQ((*strategy)["strategy"]["sharding"], "fsdp");
  EXPECT_EQ((*strategy)["strategy_text"], StrategyToText(rank.spec.strategy));
  EXPECT_EQ((*strategy)["format"], "hf-trainer");
  EXPECT_EQ((*strategy)["files"]["fsdp_config.json"], trial_dir + "/fsdp_config.json");
  EXPECT_EQ((*strategy)["model"]["family"], "llama");
  EXPECT_TRUE(std::filesystem::exists(trial_dir + "/fsdp_config.json"));
  EXPECT_TRUE(std::filesystem::exists(trial_dir + "/stderr.log"));
}

TEST_F(LauncherRankTest, OnCpuASingleRankGetsThreadsALocalRendezvousAndStartsInItsTrialDir) {
  ::setenv("MASTER_ADDR", "leftover", 1);
  LauncherRank rank = Rank("env");
  rank.spec.model = ModelSpec();  // the job gave no model config
  rank.spec.model.family = "torchscript";
  TrialResult r = RunLauncherRank(rank, options_);
  ::unsetenv("MASTER_ADDR");
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  const nlohmann::json seen = Seen(rank);
  const std::string trial_dir = LauncherTrialDir(rank, options_.work_dir);
  EXPECT_EQ(seen["env"]["OMP_NUM_THREADS"], "3");
  EXPECT_EQ(seen["env"]["AUTOACCEL_DEVICE_TYPE"], "cpu");
  // A rendezvous of its own, as torchrun gives one rank (not the leftover).
  EXPECT_EQ(seen["env"]["MASTER_ADDR"], "127.0.0.1");
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(seen["env"]["MASTER_PORT"].get<std::string>(), &port));
  EXPECT_GT(port, 0);
  EXPECT_EQ(seen["cwd"], std::filesystem::canonical(trial_dir).string());
  absl::StatusOr<nlohmann::json> strategy = ReadJsonFile(trial_dir + "/strategy.json");
  ASSERT_TRUE(strategy.ok());
  EXPECT_FALSE(strategy->contains("model")) << "no model config, no model key";
  EXPECT_EQ((*strategy)["files"], nlohmann::json::object());
  EXPECT_EQ(r.metrics.achieved_tflops, 0) << "no model config and no model event";
}

TEST_F(LauncherRankTest, AFilePlaceholderTheExportDidNotWriteFailsTheTrial) {
  LauncherRank rank = Rank("exit_after");
  rank.launcher.format = "hf-trainer";
  rank.launcher.argv = {"{python}", script_, "exit_after", "{ds_config}"};
  TrialResult r = RunLauncherRank(rank, options_);
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_FALSE(r.infrastructure);
  EXPECT_THAT(r.error, HasSubstr("{ds_config} names no value and no file the hf-trainer export"));
  EXPECT_THAT(r.error, HasSubstr("training_args.txt"));
}

// The user's framework reads what the rank's argv carries: transformers'
// HfArgumentParser(TrainingArguments) parses {*training_args} in a script
// that runs outside the trial directory, __post_init__ included (it opens
// the fsdp_config.json the flags name by absolute path).
TEST_F(LauncherRankTest, TransformersParsesTheExportedTrainingArgsFromAnotherDirectory) {
  const std::string python = AUTOACCEL_PYTHON_BIN;
  std::string out, err;
  if (testing::RunCommand({python, "-c", "import transformers"}, dir_, &out, &err,
                          absl::Seconds(60)) != 0) {
    GTEST_SKIP() << python << " has no transformers (scripts/setup installs it)";
  }
  testing::WriteFile(dir_ + "/hf.py", R"PY(
import json, os, sys
for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
    os.environ.pop(name)  # parse only: no process group to join here
from transformers import HfArgumentParser, TrainingArguments
(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
    args=sys.argv[1:] + ["--use_cpu"])
with open(os.path.join(os.environ["AUTOACCEL_TRIAL_DIR"], "parsed.json"), "w") as f:
    json.dump({"mbs": args.per_device_train_batch_size, "bf16": args.bf16,
               "fsdp_version": args.fsdp_config["version"], "output_dir": args.output_dir,
               "cwd": os.getcwd()}, f)
with open(os.environ["AUTOACCEL_METRICS_FILE"], "a") as f:
    for i in range(1, 8):
        f.write(json.dumps({"event": "step", "step": i, "step_time_s": 0.1}) + "\n")
)PY");
  LauncherRank rank;
  rank.spec = Spec(kTwoRanksFsdp, 4);
  rank.launcher.name = "hf";
  rank.launcher.format = "hf-trainer";
  rank.launcher.workdir = dir_;
  rank.launcher.argv = {"{python}", "hf.py", "--output_dir", "{trial_dir}/out", "{*training_args}"};
  options_.python = python;
  options_.timeout = absl::Seconds(50);
  TrialResult r = RunLauncherRank(rank, options_);
  ASSERT_EQ(r.status, TrialStatus::kSucceeded) << r.error;
  const std::string trial_dir = LauncherTrialDir(rank, options_.work_dir);
  absl::StatusOr<nlohmann::json> parsed = ReadJsonFile(trial_dir + "/parsed.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)["mbs"], 2);
  EXPECT_EQ((*parsed)["bf16"], true);
  EXPECT_EQ((*parsed)["fsdp_version"], 2);
  EXPECT_EQ((*parsed)["output_dir"], trial_dir + "/out");
  EXPECT_EQ((*parsed)["cwd"], dir_);
}

// Through the worker's RPC: a worker with launchers and no trial runner.
class LauncherServiceTest : public LauncherRankTest {
 protected:
  void Start(const std::string& devices_text, const std::string& runner_path = "") {
    WorkerOptions options;
    options.runner_path = runner_path;
    options.work_dir = options_.work_dir;
    absl::StatusOr<std::vector<v1::Device>> devices = ParseDevices(devices_text, int64_t{8} << 30);
    ASSERT_TRUE(devices.ok()) << devices.status();
    options.devices = *devices;
    options.python = Python();
    options.launcher_grace = absl::Seconds(1);
    for (const char* mode : {"forever", "hang", "env"}) {
      LauncherDef def;
      def.name = mode;
      def.argv = {"{python}", script_, mode};
      options.launchers[mode] = def;
    }
    service_ = std::make_unique<WorkerServiceImpl>(options);
    service_->gate()->Accept(testing::kTestSessionToken);
    testing::LocalServer local = testing::ServeLocally(service_.get(), testing::kTestSessionToken);
    server_ = std::move(local.server);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::WorkerService::NewStub(local.channel);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    if (service_) service_->Shutdown();
    LauncherRankTest::TearDown();
  }

  v1::RunTrialRequest Request(const std::string& launcher, const TrialSpec& spec) {
    v1::RunTrialRequest req;
    req.set_trial_id(spec.trial_id);
    req.set_attempt(spec.attempt);
    req.set_device_index(0);
    req.set_spec_json(TrialSpecToRequestJson(spec).dump());
    req.set_timeout_seconds(20);
    req.set_launcher(launcher);
    return req;
  }

  grpc::Status Call(const v1::RunTrialRequest& req, v1::RunTrialResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->RunTrial(&ctx, req, resp);
  }

  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

TEST_F(LauncherServiceTest, ALauncherTrialRunsAndAnswersWithItsMetrics) {
  Start("cpu:1");
  v1::RunTrialResponse resp;
  grpc::Status s = Call(Request("forever", Spec(kOneRank, 2)), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.status(), v1::TRIAL_STATUS_SUCCEEDED) << resp.reason();
  EXPECT_EQ(resp.metrics().measured_steps(), 5);
  EXPECT_DOUBLE_EQ(resp.metrics().tokens_per_second(), 64 / 0.05);
}

TEST_F(LauncherServiceTest, AnUnknownLauncherOrATrialWithoutOneIsRefused) {
  Start("cpu:1");
  v1::RunTrialResponse resp;
  grpc::Status s = Call(Request("nope", Spec(kOneRank, 2)), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "this worker has no launcher 'nope' (it has: env, forever, hang)");
  s = Call(Request("", Spec(kOneRank, 2)), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("launcher trials only"));
}

TEST_F(LauncherServiceTest, CancelTrialStopsALauncherRank) {
  Start("cpu:1");
  TrialSpec spec = Spec(kOneRank, 2);
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(500));
    v1::CancelTrialRequest req;
    req.set_trial_id(spec.trial_id);
    req.set_attempt(spec.attempt);
    v1::CancelTrialResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    EXPECT_TRUE(stub_->CancelTrial(&ctx, req, &resp).ok());
  });
  v1::RunTrialResponse resp;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(Call(Request("hang", spec), &resp).ok());
  canceller.join();
  EXPECT_EQ(resp.status(), v1::TRIAL_STATUS_CANCELLED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(LauncherServiceTest, TwoRanksOfATrialRunSideBySideEachInItsOwnDirectory) {
  Start("cpu:2");
  v1::RunTrialResponse responses[2];
  grpc::Status statuses[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      TrialSpec spec = Spec(kTwoRanksFsdp, 4);
      spec.rank = r;
      spec.local_rank = r;
      spec.master_port = 29611;
      spec.local_world_size = 2;
      spec.local_device_indices = {0, 1};
      v1::RunTrialRequest req = Request("env", spec);
      req.set_device_index(r);
      statuses[r] = Call(req, &responses[r]);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r].error_message();
    EXPECT_EQ(responses[r].status(), v1::TRIAL_STATUS_SUCCEEDED) << responses[r].reason();
    LauncherRank rank;
    rank.spec = Spec(kTwoRanksFsdp, 4);
    rank.spec.rank = r;
    const nlohmann::json env = Seen(rank)["env"];
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], "29611");
    EXPECT_FALSE(env.contains("CUDA_VISIBLE_DEVICES") && env["CUDA_VISIBLE_DEVICES"] == "0,1")
        << "cpu ranks get no visible-devices list";
  }
}

TEST_F(LauncherServiceTest, OnAMusaWorkerTheRankSeesItsDevicesInLocalRankOrder) {
  Start("musa:2,3", "/bin/true");
  TrialSpec spec = Spec(kTwoRanksFsdp, 4);
  spec.rank = 1;
  spec.local_rank = 1;
  spec.master_port = 29600;
  spec.local_world_size = 2;
  spec.group_rank = 0;
  spec.local_device_indices = {0, 1};
  v1::RunTrialRequest req = Request("env", spec);
  req.set_device_index(1);
  v1::RunTrialResponse resp;
  ASSERT_TRUE(Call(req, &resp).ok());
  ASSERT_EQ(resp.status(), v1::TRIAL_STATUS_SUCCEEDED) << resp.reason();
  LauncherRank rank;
  rank.spec = spec;
  const nlohmann::json env = Seen(rank)["env"];
  EXPECT_EQ(env["MUSA_VISIBLE_DEVICES"], "2,3");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["AUTOACCEL_DEVICE_TYPE"], "musa");
  // The engine does not run on musa: a trial without a launcher is refused.
  v1::RunTrialRequest engine_trial = req;
  engine_trial.set_launcher("");
  grpc::Status refused = Call(engine_trial, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("is a musa device: only launcher trials"));
  // local_device_indices must hold device_index at local_rank.
  req.set_device_index(0);
  grpc::Status s = Call(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("local_device_indices"));
}

}  // namespace
}  // namespace autoaccel
