// End to end with the user's own training scripts: a real server, a real
// worker with the example launchers (deploy/examples/launchers.json), the
// examples' Python processes as the trial ranks (world size 2, gloo), the
// CLI as a subprocess. What a user does: register a launcher, `tune
// --launcher NAME`, get the best strategy measured by their own script, in
// their framework's configuration.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e_cluster.h"
#include "tests/subprocess.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

using ::autoaccel::testing::WriteFile;
using e2e::Cluster;
using e2e::ParseJson;
using nlohmann::json;

const std::string kLaunchers = AUTOACCEL_SOURCE_DIR "/deploy/examples/launchers.json";

// A worker with two cpu slots and the example launchers, run by the .venv
// Python.
void StartLauncherWorker(Cluster* cluster, const std::string& launchers = kLaunchers) {
  cluster->StartWorker("w1", "cpu:2", "",
                       {"--launchers", launchers, "--python", AUTOACCEL_PYTHON_BIN});
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Tunes with `args` and returns the job (--json), expecting exit 0.
json Tune(Cluster* cluster, std::vector<std::string> args) {
  args.insert(args.begin(), "tune");
  for (const char* a : {"--warmup-steps", "1", "--measured-steps", "2", "--time-limit", "5m",
                        "--trial-timeout", "3m", "--json"}) {
    args.push_back(a);
  }
  std::string out, err;
  const int rc = cluster->Cli(args, &out, &err, absl::Minutes(6));
  EXPECT_EQ(rc, 0) << out << err;
  return ParseJson(out);
}

// Every trial a job ran ended as a measurement (or was pruned); each
// SUCCEEDED one was measured by the script: a step trains the global batch
// of `tokens_per_step` tokens.
void ExpectMeasuredByTheScript(const json& job, double tokens_per_step) {
  ASSERT_EQ(job["state"], "SUCCEEDED") << job.dump(1);
  ASSERT_TRUE(job["best"].is_object()) << job.dump(1);
  int succeeded = 0;
  for (const json& t : job["trials"]) {
    const std::string status = t["status"];
    EXPECT_THAT((std::vector<std::string>{"SUCCEEDED", "OOM", "PRUNED"}), Contains(status))
        << t.dump(1);
    if (status != "SUCCEEDED") continue;
    ++succeeded;
    const json& m = t["metrics"];
    EXPECT_EQ(m["measured_steps"], 2) << t.dump(1);
    EXPECT_NEAR(m["tokens_per_second"].get<double>() * m["step_time_median_s"].get<double>(),
                tokens_per_step, 1e-6 * tokens_per_step)
        << t.dump(1);
    EXPECT_GT(m["peak_memory_bytes"].get<int64_t>(), 0) << t.dump(1);
    EXPECT_GT(m["final_loss"].get<double>(), 0) << t.dump(1);
  }
  EXPECT_GE(succeeded, 1) << job.dump(1);
}

TEST(LauncherEndToEnd, HuggingFaceTrainerScriptIsTunedAndItsBestExportedAsTrainerFlags) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  StartLauncherWorker(&cluster);
  ASSERT_TRUE(cluster.WaitForWorkers(1));

  // The worker advertises its launchers; the client sees them.
  std::string out;
  ASSERT_EQ(cluster.Cli({"workers", "--json"}, &out), 0) << out;
  const json workers = ParseJson(out);
  std::set<std::string> names;
  for (const json& l : workers["workers"][0]["launchers"]) names.insert(l["name"]);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"hf-llama-tiny", "torch-fsdp-tiny"}));

  const json job = Tune(&cluster, {"--launcher",          "hf-llama-tiny",
                                   "--world-size",        "2",
                                   "--global-batch-size", "4",
                                   "--seq-len",           "32",
                                   "--precisions",        "bf16,fp32",
                                   "--checkpointings",    "none",
                                   "--micro-batch-sizes", "2",
                                   "--attentions",        "sdpa",
                                   "--optimizers",        "adamw",
                                   "--shardings",         "none"});
  ExpectMeasuredByTheScript(job, 4 * 32);
  EXPECT_EQ(job["launcher"]["format"], "hf-trainer") << job.dump(1);

  // Each rank ran in its own trial directory with the strategy and the
  // framework's flags the worker wrote.
  const std::string trial_id = job["trials"][0]["trial_id"];
  const std::string rank1 = absl::StrCat(cluster.dir(), "/", trial_id, "-a1-r1");
  const json strategy = ParseJson(ReadAll(rank1 + "/strategy.json"));
  EXPECT_EQ(strategy["rank"], 1);
  EXPECT_EQ(strategy["world_size"], 2);
  EXPECT_EQ(strategy["format"], "hf-trainer");
  EXPECT_THAT(ReadAll(rank1 + "/training_args.txt"), HasSubstr("--per_device_train_batch_size=2"));
  // The Trainer trained the two ranks data parallel over gloo (its own
  // summary of what it applied, on the rank's stderr).
  EXPECT_THAT(ReadAll(rank1 + "/stderr.log"), HasSubstr("MULTI_CPU"));

  // The answer is kept apart from the engine's, named by its launcher.
  ASSERT_EQ(cluster.Cli({"strategies", "--json"}, &out), 0) << out;
  const json stored = ParseJson(out)["strategies"];
  ASSERT_EQ(stored.size(), 1u) << out;
  EXPECT_EQ(stored[0]["model"]["family"], "launcher:hf-llama-tiny") << out;
  EXPECT_THAT(stored[0]["signature"].get<std::string>(), StartsWith("launcher-hf-llama-tiny-"));

  // The answer in the launcher's own format, by default.
  const std::string dir = cluster.dir() + "/export";
  ASSERT_EQ(cluster.Cli({"export", "--job", job["job_id"], "--out", dir}, &out), 0) << out;
  const std::string args = ReadAll(dir + "/training_args.txt");
  EXPECT_THAT(args, HasSubstr("--per_device_train_batch_size=2"));
  EXPECT_THAT(args, HasSubstr(job["best"]["strategy_json"]["precision"] == "bf16"
                                  ? "--bf16"
                                  : "--per_device_train_batch_size"));
}

TEST(LauncherEndToEnd, PlainPyTorchScriptTunesDataParallelShardingOverGloo) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  StartLauncherWorker(&cluster);
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  const json job = Tune(&cluster, {"--launcher",          "torch-fsdp-tiny",
                                   "--world-size",        "2",
                                   "--global-batch-size", "4",
                                   "--seq-len",           "32",
                                   "--shardings",         "none,fsdp",
                                   "--precisions",        "fp32",
                                   "--checkpointings",    "none",
                                   "--micro-batch-sizes", "2",
                                   "--attentions",        "sdpa",
                                   "--optimizers",        "adamw"});
  ExpectMeasuredByTheScript(job, 4 * 32);
  std::set<std::string> shardings;
  for (const json& t : job["trials"]) {
    if (t["status"] == "SUCCEEDED") shardings.insert(t["strategy_json"]["sharding"]);
  }
  EXPECT_EQ(shardings, (std::set<std::string>{"none", "fsdp"})) << job.dump(1);

  // No format of its own: export needs one named.
  std::string out, err;
  EXPECT_EQ(cluster.Cli({"export", "--job", job["job_id"]}, &out, &err), 2) << out << err;
  EXPECT_THAT(err, HasSubstr("launcher has no export format"));
  EXPECT_EQ(cluster.Cli({"export", "--job", job["job_id"], "--format", "torchrun"}, &out, &err), 0)
      << out << err;
  EXPECT_THAT(out, HasSubstr("torchrun"));
}

TEST(LauncherEndToEnd, AScriptThatFailsIsRecordedWithItsErrorAndAnUnknownLauncherIsRefused) {
  Cluster cluster;
  // A launcher whose script dies before its first step, with a message.
  const std::string launchers = cluster.dir() + "/launchers.json";
  WriteFile(launchers, R"json({"launchers": {"broken": {
      "argv": ["{python}", "-c",
               "import sys; sys.stderr.write('cannot find my dataset\\n'); sys.exit(3)"],
      "dimensions": ["precision"]}}})json");
  ASSERT_TRUE(cluster.StartServer());
  StartLauncherWorker(&cluster, launchers);
  ASSERT_TRUE(cluster.WaitForWorkers(1));

  std::string out, err;
  EXPECT_EQ(cluster.Cli({"tune", "--launcher", "nope", "--global-batch-size", "2", "--seq-len", "8",
                         "--json"},
                        &out, &err),
            1);
  EXPECT_THAT(err, AllOf(HasSubstr("no healthy worker offers 'nope'"), HasSubstr("broken")));

  EXPECT_EQ(cluster.Cli({"tune", "--launcher", "broken", "--global-batch-size", "2", "--seq-len",
                         "8", "--precisions", "fp32", "--warmup-steps", "1", "--measured-steps",
                         "1", "--time-limit", "2m", "--json"},
                        &out, &err, absl::Minutes(3)),
            1);
  const json job = ParseJson(out);
  ASSERT_FALSE(job["trials"].empty()) << out;
  const json& t = job["trials"][0];
  EXPECT_EQ(t["status"], "FAILED") << t.dump(1);
  EXPECT_THAT(t["reason"].get<std::string>(), HasSubstr("cannot find my dataset")) << t.dump(1);

  // The rank's own output, from the worker that ran it: by the job's id and
  // the trial's #, and by the trial's id.
  const std::string job_id = job["job_id"];
  ASSERT_EQ(cluster.Cli({"logs", job_id, "0"}, &out, &err), 0) << out << err;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("trial ", t["trial_id"].get<std::string>(),
                                          " attempt 1, rank 0 on worker w1")));
  EXPECT_THAT(out, HasSubstr("==> stderr.log (23 bytes) <==\ncannot find my dataset\n"));
  ASSERT_EQ(cluster.Cli({"logs", t["trial_id"], "--tail", "1", "--json"}, &out, &err), 0)
      << out << err;
  const json logs = ParseJson(out);
  EXPECT_EQ(logs["worker_id"], "w1") << out;
  EXPECT_EQ(logs["running"], false) << out;
  ASSERT_FALSE(logs["files"].empty()) << out;
  EXPECT_EQ(logs["files"][0]["name"], "stderr.log") << out;
  EXPECT_EQ(logs["files"][0]["tail"], "cannot find my dataset\n") << out;
  // The trial table points to it.
  ASSERT_EQ(cluster.Cli({"trials", job_id}, &out, &err), 0) << out << err;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("a failed trial's whole output: autoaccel logs ", job_id,
                                          " 0 [--rank N]")));
  // A rank the trial does not have, and a trial that does not exist.
  EXPECT_EQ(cluster.Cli({"logs", job_id, "0", "--rank", "1"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("has ranks 0 to 0, got 1"));
  EXPECT_EQ(cluster.Cli({"logs", job_id, "999"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("has no trial #999"));
}

}  // namespace
}  // namespace autoaccel
