// End to end: real server, real workers, real trial runner, the CLI as a
// subprocess, and the SQLite file read back directly.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spec/strategy.h"
#include "tests/e2e_cluster.h"
#include "tests/subprocess.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

using ::autoaccel::testing::AddressFromLine;
using ::autoaccel::testing::FreePort;
using ::autoaccel::testing::MakeTempDir;
using ::autoaccel::testing::RunCommand;
using ::autoaccel::testing::Subprocess;
using ::autoaccel::testing::WriteFile;
using e2e::Cluster;
using e2e::kTinyGpt;
using e2e::ParseJson;
using nlohmann::json;

// A finished job's trials are the `search` trials the search ran, in
// proposal order, then the repeats: its best three at least (fewer when
// fewer succeeded), and more while the answer was not settled (server/
// settle.h), each repeating a SUCCEEDED search trial.
void ExpectSearchThenRepeats(const json& job, size_t search) {
  const json& trials = job["trials"];
  ASSERT_GE(trials.size(), search) << job.dump();
  std::map<std::string, std::string> status_of;
  size_t succeeded = 0;
  for (size_t i = 0; i < trials.size(); ++i) {
    const json& t = trials[i];
    status_of[t["trial_id"]] = t["status"];
    EXPECT_EQ(t["confirms"].get<std::string>().empty(), i < search) << t.dump();
    if (i < search) succeeded += t["status"] == "SUCCEEDED";
  }
  EXPECT_GE(trials.size() - search, std::min<size_t>(3, succeeded)) << job.dump();
  for (size_t i = search; i < trials.size(); ++i) {
    EXPECT_EQ(status_of[trials[i]["confirms"]], "SUCCEEDED") << trials[i].dump();
  }
  if (job["state"] == "SUCCEEDED" && succeeded > 0) {
    EXPECT_THAT(job["best"]["certainty"].get<std::string>(),
                ::testing::AnyOf("settled", "tie", "provisional"))
        << job.dump();
  }
}

TEST(EndToEnd, TuneRecordsEveryTrialAndBestSurvivesRestart) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  cluster.StartWorker("w2");
  ASSERT_TRUE(cluster.WaitForWorkers(2));

  std::vector<std::string> args =
      cluster.TuneArgs(4, {"--time-limit", "3m", "--max-trials", "6", "--warmup-steps", "1",
                           "--measured-steps", "2", "--json"});
  std::string out, err;
  const absl::Time submitted = absl::Now();
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  const double wall_seconds = absl::ToDoubleSeconds(absl::Now() - submitted);
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  ASSERT_TRUE(job["best"].is_object()) << out;
  const std::string best = job["best"]["strategy"].get<std::string>();
  absl::StatusOr<Strategy> from_text = ParseStrategyText(best);
  absl::StatusOr<Strategy> from_json = StrategyFromJson(job["best"]["strategy_json"]);
  ASSERT_TRUE(from_text.ok() && from_json.ok()) << out;
  EXPECT_EQ(*from_text, *from_json);
  EXPECT_GT(job["best"]["metrics"]["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(job["best"]["metrics"]["peak_memory_bytes"].get<int64_t>(), 0);
  // The job's elapsed time is what the user waited: it ran some trials, and
  // ended before the command that waited for it returned.
  ASSERT_TRUE(job["elapsed_seconds"].is_number()) << out;
  EXPECT_GT(job["elapsed_seconds"].get<double>(), 0.1);
  EXPECT_LE(job["elapsed_seconds"].get<double>(), wall_seconds);

  // Every trial accounted for, in a final state: the six the search ran, and
  // then its best three measured again (more while the answer was not
  // settled); the answer rests on the repeats.
  ExpectSearchThenRepeats(job, 6);
  std::vector<std::string> expected_rows;
  for (const json& t : job["trials"]) {
    const std::string status = t["status"];
    EXPECT_THAT(
        (std::vector<std::string>{"SUCCEEDED", "OOM", "FAILED", "TIMEOUT", "PRUNED", "CANCELLED"}),
        ::testing::Contains(status));
    EXPECT_TRUE(StrategyFromJson(t["strategy_json"]).ok());
    expected_rows.push_back(absl::StrCat(t["trial_id"].get<std::string>(), "|", status, "|",
                                         t["strategy"].get<std::string>()));
  }
  // Measured again; "confirmed" only when the repeats agree, which a busy
  // machine may not give.
  EXPECT_GE(job["best"]["measurements"].get<int>(), 2) << out;
  EXPECT_EQ(job["best"]["confirmed"].get<bool>(), job["best"]["certainty"] != "provisional") << out;
  EXPECT_THAT(cluster.Query(absl::StrCat(
                  "SELECT trial_id, status, strategy_text FROM trials WHERE job_id = '",
                  job["job_id"].get<std::string>(), "' ORDER BY idx")),
              ::testing::ElementsAreArray(expected_rows));
  EXPECT_THAT(cluster.Query(absl::StrCat("SELECT state FROM jobs WHERE job_id = '",
                                         job["job_id"].get<std::string>(), "'")),
              ::testing::ElementsAre("SUCCEEDED"));

  // The answer outlives the server.
  cluster.StopServer();
  ASSERT_TRUE(cluster.StartServer());
  std::vector<std::string> best_args = {"best"};
  for (const std::string& a : cluster.ModelArgs()) best_args.push_back(a);
  best_args.push_back("--json");
  ASSERT_EQ(cluster.Cli(best_args, &out, &err), 0) << out << err;
  json answer = ParseJson(out);
  EXPECT_EQ(answer["best"]["strategy"], best);
  EXPECT_EQ(answer["best"]["strategy_json"], job["best"]["strategy_json"]);

  // A question never tuned: a clear "no strategy recorded", exit code 3.
  best_args = {"best"};
  for (const std::string& a : cluster.ModelArgs(8)) best_args.push_back(a);
  EXPECT_EQ(cluster.Cli(best_args, &out, &err), 3);
  EXPECT_THAT(err, HasSubstr("no strategy recorded"));
}

// Tuning the same model twice: the second time the strategy database
// answers at once, running no trial and saying where the answer came from;
// `strategies` lists it with its provenance; --force tunes again.
TEST(EndToEnd, TuningTwiceAnswersTheSecondTimeFromTheDatabaseWithoutATrial) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  const std::vector<std::string> args =
      cluster.TuneArgs(4, {"--time-limit", "2m", "--max-trials", "2", "--warmup-steps", "1",
                           "--measured-steps", "1", "--json"});
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  const json first = ParseJson(out);
  ASSERT_EQ(first["state"], "SUCCEEDED") << out;
  EXPECT_TRUE(first["answered_from"].is_null()) << out;
  const std::string first_id = first["job_id"];
  const std::string best = first["best"]["strategy"];

  const absl::Time submitted = absl::Now();
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  EXPECT_LT(absl::Now() - submitted, absl::Seconds(10)) << "answered at once";
  const json second = ParseJson(out);
  const std::string second_id = second["job_id"];
  EXPECT_NE(second_id, first_id);
  EXPECT_EQ(second["state"], "SUCCEEDED") << out;
  EXPECT_EQ(second["best"]["strategy"], best) << out;
  EXPECT_EQ(second["best"]["metrics"]["tokens_per_second"],
            first["best"]["metrics"]["tokens_per_second"])
      << out;
  EXPECT_EQ(second["answered_from"]["job_id"], first_id) << out;
  EXPECT_GE(second["answered_from"]["engine_version"].get<int>(), 1) << out;
  EXPECT_THAT(second["trials"], ::testing::IsEmpty()) << out;
  EXPECT_THAT(err, HasSubstr("answered from the strategy database: job " + first_id));
  EXPECT_THAT(cluster.Query("SELECT count(*) FROM trials WHERE job_id = '" + second_id + "'"),
              ::testing::ElementsAre("0"));
  EXPECT_THAT(cluster.Query("SELECT state FROM jobs WHERE job_id = '" + second_id + "'"),
              ::testing::ElementsAre("SUCCEEDED"));
  // `job` shows it the same way, in text too.
  ASSERT_EQ(cluster.Cli({"job", second_id}, &out, &err), 0) << err;
  EXPECT_THAT(out, AllOf(HasSubstr("answered from the strategy database: job " + first_id),
                         HasSubstr("--force to tune again"), HasSubstr(best)));

  // The database lists the answer with its provenance.
  ASSERT_EQ(cluster.Cli({"strategies", "--model", "gpt2", "--device", "cpu", "--json"}, &out, &err),
            0)
      << err;
  const json list = ParseJson(out);
  ASSERT_EQ(list["strategies"].size(), 1u) << out;
  EXPECT_EQ(list["strategies"][0]["job_id"], first_id);
  EXPECT_EQ(list["strategies"][0]["strategy"], best);
  EXPECT_GE(list["strategies"][0]["engine_version"].get<int>(), 1);
  EXPECT_GT(list["strategies"][0]["metrics"]["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(list["strategies"][0]["metrics"]["peak_memory_bytes"].get<int64_t>(), 0);
  ASSERT_EQ(cluster.Cli({"strategies", "--device", "cuda", "--json"}, &out, &err), 0) << err;
  EXPECT_THAT(ParseJson(out)["strategies"], ::testing::IsEmpty());
  ASSERT_EQ(cluster.Cli({"strategies"}, &out, &err), 0) << err;
  EXPECT_THAT(out, AllOf(HasSubstr(first_id), HasSubstr(best), HasSubstr("cpu x1")));

  // --force tunes again.
  std::vector<std::string> forced = args;
  forced.push_back("--force");
  ASSERT_EQ(cluster.Cli(forced, &out, &err), 0) << out << err;
  const json third = ParseJson(out);
  EXPECT_TRUE(third["answered_from"].is_null()) << out;
  EXPECT_FALSE(third["trials"].empty()) << out;
}

// The cost model's prediction is shown beside each measurement, in the
// table `tune` prints as trials finish and in its JSON; a second job on the
// same device type starts from the first job's trials and says so.
TEST(EndToEnd, TuneShowsEachTrialsPredictionAndTheNextJobStartsWarm) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  std::string out, err;
  ASSERT_EQ(cluster.Cli(cluster.TuneArgs(4, {"--time-limit", "2m", "--max-trials", "3",
                                             "--warmup-steps", "1", "--measured-steps", "2"}),
                        &out, &err),
            0)
      << out << err;
  EXPECT_THAT(err, HasSubstr("pred ms"));
  EXPECT_THAT(err, HasSubstr("pred MiB"));

  // Another batch size: another signature, so not answered from the first.
  ASSERT_EQ(
      cluster.Cli(cluster.TuneArgs(8, {"--time-limit", "2m", "--max-trials", "3", "--warmup-steps",
                                       "1", "--measured-steps", "2", "--json"}),
                  &out, &err),
      0)
      << out << err;
  const json job = ParseJson(out);
  EXPECT_THAT(job["algorithm"].get<std::string>(),
              ::testing::MatchesRegex(".*; cost model warmed by [1-9][0-9]* earlier trials? on "
                                      "cpu devices"))
      << out;
  int predicted = 0;
  for (const json& t : job["trials"]) {
    if (!t["confirms"].get<std::string>().empty()) {
      EXPECT_TRUE(t["predicted"].is_null()) << t.dump();  // a repeat, not a proposal
      continue;
    }
    ASSERT_TRUE(t["predicted"].is_object()) << t.dump();
    EXPECT_GT(t["predicted"]["step_time_s"].get<double>(), 0) << t.dump();
    EXPECT_GT(t["predicted"]["peak_memory_bytes"].get<int64_t>(), 0) << t.dump();
    EXPECT_GT(t["predicted"]["tokens_per_second"].get<double>(), 0) << t.dump();
    ++predicted;
  }
  EXPECT_EQ(predicted, 3) << out;
  // Stored beside the measurement.
  EXPECT_THAT(
      cluster.Query(absl::StrCat("SELECT count(*) FROM trials WHERE job_id = '",
                                 job["job_id"].get<std::string>(), "' AND predicted_json != ''")),
      ::testing::ElementsAre("3"));
}

// The time limit is a promise: the job ends within it plus 5 s with the
// best measured so far, whatever is still running is cancelled and recorded
// as such, and the device is free again.
TEST(EndToEnd, TimeLimitIsKeptToTheSecondAndRunningTrialsAreCancelled) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  std::vector<std::string> args = cluster.TuneArgs(
      4, {"--time-limit", "15s", "--warmup-steps", "1", "--measured-steps", "2", "--json"});
  std::string out, err;
  const absl::Time start = absl::Now();
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  // The space (hundreds of strategies) does not fit 15 s: auto searches.
  EXPECT_THAT(job["algorithm"].get<std::string>(), ::testing::StartsWith("auto: bayes")) << out;
  // The request as the server validated it, defaults filled in.
  EXPECT_EQ(job["request"]["algorithm"], "auto") << out;
  EXPECT_EQ(job["request"]["time_limit_seconds"], 15) << out;
  EXPECT_EQ(job["request"]["model"]["family"], "gpt2") << out;
  EXPECT_EQ(job["request"]["measured_steps"], 2) << out;
  const double elapsed = job["elapsed_seconds"].get<double>();
  EXPECT_LE(elapsed, 20.0) << out;
  // The job ends at the limit, or earlier once the search stopped to leave
  // its repeats room and they ran.
  const bool at_limit = elapsed >= 15.0;
  if (!at_limit) {
    EXPECT_THAT(job["status_message"].get<std::string>(), HasSubstr("measured")) << out;
  }
  EXPECT_LE(wall, 22.0);  // the CLI returned with the job
  ASSERT_TRUE(job["best"].is_object()) << out;
  // Server timestamps: the limit counts from the job's creation.
  const double deadline = job["created_at"].get<double>() + 15.0;
  int succeeded = 0, cancelled = 0;
  double last_success = 0;
  for (const json& t : job["trials"]) {
    if (t["status"] == "SUCCEEDED") {
      ++succeeded;
      // A trial still running at the limit is never recorded as a success.
      EXPECT_LE(t["finished_at"].get<double>(), deadline) << t.dump();
      last_success = std::max(last_success, t["finished_at"].get<double>());
    }
    if (t["status"] == "CANCELLED") {
      // Confirmations still waiting for the device never started.
      if (t["started_at"].get<double>() > 0) ++cancelled;
      EXPECT_THAT(t["reason"].get<std::string>(), HasSubstr("time limit")) << t.dump();
    }
    EXPECT_NE(t["status"], "RUNNING") << t.dump();
  }
  EXPECT_GE(succeeded, 1) << out;
  // One device: the trial running at the limit is cancelled. Only a trial that
  // ended in the last moments before the limit, too late for the next one to
  // start, leaves none running then.
  if (!at_limit) {
    EXPECT_EQ(cancelled, 0) << out;
  } else if (cancelled == 0) {
    EXPECT_GE(last_success, deadline - 0.05) << out;
  } else {
    EXPECT_EQ(cancelled, 1) << out;
  }
  // The cancelled trial's process is stopped and its device freed.
  bool free = false;
  for (int i = 0; i < 50 && !free; ++i) {
    std::string workers;
    if (cluster.Cli({"workers", "--json"}, &workers) == 0) {
      free = ParseJson(workers)["workers"][0]["devices"][0]["held_by_trial"] == "";
    }
    if (!free) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(free);
}

TEST(EndToEnd, GangTrialsSearchParallelLayoutsAcrossWorkers) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("g1", "cpu:2");
  cluster.StartWorker("g2", "cpu:2");
  ASSERT_TRUE(cluster.WaitForWorkers(2));

  // 4 ranks per trial: 2 on each worker. Layouts dp4 and dp2 x tp2, each
  // without sharding and with fsdp.
  std::vector<std::string> args = cluster.TuneArgs(8, {"--world-size",
                                                       "4",
                                                       "--tp-sizes",
                                                       "1,2",
                                                       "--pp-sizes",
                                                       "1",
                                                       "--shardings",
                                                       "none,fsdp",
                                                       "--sequence-parallel",
                                                       "off",
                                                       "--precisions",
                                                       "fp32",
                                                       "--attentions",
                                                       "sdpa",
                                                       "--checkpointings",
                                                       "none",
                                                       "--optimizers",
                                                       "fused_adamw",
                                                       "--micro-batch-sizes",
                                                       "2",
                                                       "--time-limit",
                                                       "3m",
                                                       "--warmup-steps",
                                                       "1",
                                                       "--measured-steps",
                                                       "2",
                                                       "--json"});
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  ExpectSearchThenRepeats(job, 4);  // and the best three again
  std::vector<std::string> layouts;
  for (const json& t : job["trials"]) {
    EXPECT_EQ(t["status"], "SUCCEEDED") << t.dump();
    if (!t["confirms"].get<std::string>().empty()) continue;
    const json& s = t["strategy_json"];
    EXPECT_EQ(s["data_parallel"].get<int>() * s["tensor_parallel"].get<int>(), 4) << t.dump();
    layouts.push_back(absl::StrCat("dp", s["data_parallel"].get<int>(), "_tp",
                                   s["tensor_parallel"].get<int>(), "_",
                                   s["sharding"].get<std::string>()));
    // Every rank's memory, the gang's communication.
    EXPECT_EQ(t["metrics"]["rank_peak_memory_bytes"].size(), 4u) << t.dump();
    EXPECT_GT(t["metrics"]["comm_time_s"].get<double>(), 0) << t.dump();
    EXPECT_THAT(t["worker_ids"].dump(), ::testing::AllOf(HasSubstr("g1"), HasSubstr("g2")));
  }
  EXPECT_THAT(layouts, ::testing::UnorderedElementsAre("dp4_tp1_none", "dp4_tp1_fsdp",
                                                       "dp2_tp2_none", "dp2_tp2_fsdp"));
  EXPECT_THAT(job["best"]["strategy"].get<std::string>(), HasSubstr("dp="));

  // `logs` reads a rank's output on the worker that ran it: the last rank
  // of the first trial.
  const json& first = job["trials"][0];
  ASSERT_EQ(cluster.Cli({"logs", first["trial_id"], "--rank", "3", "--json"}, &out, &err), 0)
      << out << err;
  const json logs = ParseJson(out);
  EXPECT_EQ(logs["worker_id"], first["worker_ids"][3]) << out;
  EXPECT_EQ(logs["rank"], 3) << out;
  EXPECT_THAT(logs["directory"].get<std::string>(),
              ::testing::EndsWith(absl::StrCat(first["trial_id"].get<std::string>(), "-a1-r3")));
  ASSERT_EQ(logs["files"].size(), 1u) << out;
  EXPECT_EQ(logs["files"][0]["name"], "trial.log") << out;

  // The pool is free again, and says so per device.
  ASSERT_EQ(cluster.Cli({"workers", "--json"}, &out, &err), 0) << err;
  json workers = ParseJson(out);
  ASSERT_EQ(workers["workers"].size(), 2u);
  for (const json& w : workers["workers"]) {
    ASSERT_EQ(w["devices"].size(), 2u) << w.dump();
    for (const json& d : w["devices"]) EXPECT_EQ(d.value("held_by_trial", ""), "") << w.dump();
  }
}

// The proxy tests' tune: a tiny Llama of 8 layers on 4 ranks, over tensor
// parallel 1 and 2 (no sequence parallelism), fp32, sdpa, no recompute,
// fused AdamW and the given micro-batch sizes, with --proxy `proxy`.
std::vector<std::string> ProxyTuneArgs(const std::string& proxy, const std::string& micro_batches) {
  const std::string config = MakeTempDir("autoaccel-proxy-") + "/config.json";
  WriteFile(config, R"({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
                        "num_hidden_layers": 8, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "vocab_size": 96,
                        "max_position_embeddings": 64})");
  return {"tune",        "--model",
          "llama",       "--model-config",
          config,        "--seq-len",
          "16",          "--global-batch-size",
          "8",           "--world-size",
          "4",           "--tp-sizes",
          "1,2",         "--pp-sizes",
          "1",           "--shardings",
          "none",        "--sequence-parallel",
          "off",         "--precisions",
          "fp32",        "--attentions",
          "sdpa",        "--checkpointings",
          "none",        "--optimizers",
          "fused_adamw", "--micro-batch-sizes",
          micro_batches, "--proxy",
          proxy,         "--time-limit",
          "3m",          "--warmup-steps",
          "1",           "--measured-steps",
          "2",           "--json"};
}

TEST(EndToEnd, ProxyTrialsMeasureAFewLayersOnFewerRanksAndAnswerWithTheExtrapolation) {
  // A 4-rank job on a pool of 2 devices: each candidate runs as the model's
  // first 2 of 8 layers on 2 ranks, and its figures are extrapolated.
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("p1", "cpu:2");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  const std::vector<std::string> args = ProxyTuneArgs("layers=2,world-size=2", "1,2");
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  EXPECT_THAT(job["algorithm"].get<std::string>(),
              HasSubstr("proxy trials: 2 of 8 layers on 2 of 4 ranks"));
  int measured = 0;
  for (const json& t : job["trials"]) {
    if (t["status"] != "SUCCEEDED") continue;
    ++measured;
    // Two ranks ran it; its own strategy has half the job's replicas.
    EXPECT_EQ(t["worker_ids"].size(), 2u) << t.dump();
    const json& proxy = t["proxy"];
    ASSERT_TRUE(proxy.is_object()) << t.dump();
    EXPECT_EQ(proxy["proxy"], "2 of 8 layers on 2 of 4 ranks") << t.dump();
    const int tp = t["strategy_json"]["tensor_parallel"];
    EXPECT_THAT(proxy["strategy"].get<std::string>(),
                HasSubstr(absl::StrCat("dp=", 2 / tp, ",tp=", tp, ",")));
    // Four times the layers and twice the replicas: a longer step than
    // measured, whose tokens/s counts the job's whole batch (8 x 16).
    const double step = t["metrics"]["step_time_median_s"];
    EXPECT_GT(step, proxy["measured"]["step_time_median_s"].get<double>()) << t.dump();
    EXPECT_NEAR(t["metrics"]["tokens_per_second"].get<double>(), 128 / step, 1e-6 * 128 / step);
    EXPECT_LT(proxy["step_time_low_s"].get<double>(), step);
    EXPECT_GT(proxy["step_time_high_s"].get<double>(), step);
  }
  EXPECT_GE(measured, 4) << out;
  ASSERT_TRUE(job["best"].is_object()) << out;
  EXPECT_TRUE(job["best"]["proxy"].is_object()) << out;
  EXPECT_THAT(job["status_message"].get<std::string>(),
              HasSubstr("extrapolated from proxy trials (2 of 8 layers on 2 of 4 ranks), so not "
                        "stored in the strategy database"));
  // The text view says so too.
  ASSERT_EQ(cluster.Cli({"job", job["job_id"]}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("EXTRAPOLATED, not measured at full size"));

  // A proxy that is no proxy, or cannot be cut, is refused naming the flag.
  std::vector<std::string> bad = args;
  bad[std::find(bad.begin(), bad.end(), "--proxy") - bad.begin() + 1] = "layers=8,world-size=4";
  EXPECT_EQ(cluster.Cli(bad, &out, &err), 1) << out << err;
  EXPECT_THAT(err, HasSubstr("proxy: layers=8,world-size=4 is the full run itself"));
  bad[std::find(bad.begin(), bad.end(), "--proxy") - bad.begin() + 1] = "layers=9";
  EXPECT_EQ(cluster.Cli(bad, &out, &err), 1) << out << err;
  EXPECT_THAT(err, HasSubstr("proxy: layers must be 1 to the model's 8, got 9"));
}

TEST(EndToEnd, ProxyAutoOnAPoolThatHoldsTheFullRunChecksItsAnswerAtFullSize) {
  // An 8-layer model on 4 ranks, a pool of 4: auto measures 2 of the
  // layers on 2 ranks (two proxies side by side), then the answer once at
  // full size, and the job says how far the extrapolation was off.
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("p1", "cpu:4");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  std::string out, err;
  ASSERT_EQ(cluster.Cli(ProxyTuneArgs("auto", "2"), &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  EXPECT_THAT(job["algorithm"].get<std::string>(),
              HasSubstr("proxy trials: 2 of 8 layers on 2 of 4 ranks (auto)"));
  const json* check = nullptr;
  for (const json& t : job["trials"]) {
    if (t["full_size"].get<bool>()) {
      ASSERT_EQ(check, nullptr) << "two full-size checks: " << out;
      check = &t;
    } else if (t["status"] == "SUCCEEDED") {
      EXPECT_EQ(t["worker_ids"].size(), 2u) << t.dump();
      EXPECT_TRUE(t["proxy"].is_object()) << t.dump();
    }
  }
  ASSERT_NE(check, nullptr) << out;
  EXPECT_EQ((*check)["status"], "SUCCEEDED") << check->dump();
  EXPECT_EQ((*check)["worker_ids"].size(), 4u) << check->dump();
  EXPECT_TRUE((*check)["proxy"].is_null()) << check->dump();
  EXPECT_EQ((*check)["strategy"], job["best"]["strategy"]) << out;
  // The answer stays the proxies' extrapolation; the check reports its error.
  EXPECT_TRUE(job["best"]["proxy"].is_object()) << out;
  EXPECT_THAT(job["status_message"].get<std::string>(),
              ::testing::ContainsRegex("checked at full size \\(trial [0-9]+\\): measured [0-9]+ "
                                       "tokens/s where its proxy trial [0-9]+ extrapolated [0-9]+ "
                                       "\\([-+][0-9.]+%\\)"));
}

TEST(EndToEnd, ContextParallelLayoutsSplitEachSequenceOverTheirRanks) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("c1", "cpu:2");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  // Two ranks per trial: dp2, and cp2 with each exchange (the ring with
  // the math kernel it runs).
  std::vector<std::string> args = cluster.TuneArgs(4, {"--world-size",
                                                       "2",
                                                       "--tp-sizes",
                                                       "1",
                                                       "--pp-sizes",
                                                       "1",
                                                       "--cp-sizes",
                                                       "1,2",
                                                       "--cp-comms",
                                                       "p2p,all_gather",
                                                       "--shardings",
                                                       "none",
                                                       "--precisions",
                                                       "fp32",
                                                       "--attentions",
                                                       "math",
                                                       "--checkpointings",
                                                       "none",
                                                       "--optimizers",
                                                       "fused_adamw",
                                                       "--micro-batch-sizes",
                                                       "2",
                                                       "--time-limit",
                                                       "3m",
                                                       "--warmup-steps",
                                                       "1",
                                                       "--measured-steps",
                                                       "2",
                                                       "--json"});
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  ExpectSearchThenRepeats(job, 3);
  std::vector<std::string> layouts;
  for (const json& t : job["trials"]) {
    EXPECT_EQ(t["status"], "SUCCEEDED") << t.dump();
    if (!t["confirms"].get<std::string>().empty()) continue;
    const json& s = t["strategy_json"];
    layouts.push_back(absl::StrCat("dp", s["data_parallel"].get<int>(), "_cp",
                                   s["context_parallel"].get<int>(), "_",
                                   s["context_parallel_comm"].get<std::string>()));
    EXPECT_GT(t["metrics"]["comm_time_s"].get<double>(), 0) << t.dump();
  }
  EXPECT_THAT(layouts,
              ::testing::UnorderedElementsAre("dp2_cp1_p2p", "dp1_cp2_p2p", "dp1_cp2_all_gather"));
}

TEST(EndToEnd, ExpertParallelLayoutsSpreadMixtralsExpertsOverTheirRanks) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("c1", "cpu:2");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  // A tiny Mixtral (4 experts, top 2) on two ranks: every expert on both,
  // or two on each with the tokens exchanged all-to-all; in fp32 and with
  // fp8 linear layers (which a CPU worker emulates).
  const std::string config = MakeTempDir("autoaccel-mixtral-") + "/config.json";
  WriteFile(config, R"({"model_type": "mixtral", "hidden_size": 32, "intermediate_size": 48,
                        "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "vocab_size": 96,
                        "max_position_embeddings": 64, "num_local_experts": 4,
                        "num_experts_per_tok": 2})");
  const std::vector<std::string> args = {
      "tune",     "--model",          "mixtral",     "--model-config",
      config,     "--seq-len",        "16",          "--global-batch-size",
      "4",        "--world-size",     "2",           "--tp-sizes",
      "1",        "--pp-sizes",       "1",           "--ep-sizes",
      "1,2",      "--shardings",      "none,zero1",  "--precisions",
      "fp32,fp8", "--attentions",     "math",        "--checkpointings",
      "none",     "--optimizers",     "fused_adamw", "--micro-batch-sizes",
      "2",        "--time-limit",     "3m",          "--warmup-steps",
      "1",        "--measured-steps", "2",           "--json"};
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  std::vector<std::string> layouts;
  for (const json& t : job["trials"]) {
    EXPECT_EQ(t["status"], "SUCCEEDED") << t.dump();
    if (!t["confirms"].get<std::string>().empty()) continue;
    const json& s = t["strategy_json"];
    layouts.push_back(absl::StrCat("ep", s["expert_parallel"].get<int>(), "_",
                                   s["sharding"].get<std::string>(), "_",
                                   s["precision"].get<std::string>()));
    EXPECT_GT(t["metrics"]["comm_time_s"].get<double>(), 0) << t.dump();
  }
  EXPECT_THAT(layouts, ::testing::UnorderedElementsAre(
                           "ep1_none_fp32", "ep2_none_fp32", "ep1_zero1_fp32", "ep2_zero1_fp32",
                           "ep1_none_fp8", "ep2_none_fp8", "ep1_zero1_fp8", "ep2_zero1_fp8"));
  // The answer names its expert parallelism in its text when it uses it.
  const std::string best = job["best"]["strategy"].get<std::string>();
  EXPECT_EQ(absl::StrContains(best, ",ep=2,"),
            job["best"]["strategy_json"]["expert_parallel"].get<int>() == 2)
      << best;
}

TEST(EndToEnd, AFourRankQwen3MoeTuneWeighsExpertTensorAndShardedLayouts) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("c1", "cpu:4");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  // A tiny Qwen3-MoE (8 experts, top 2, a dense first layer) on four ranks:
  // experts on every rank or spread over 2 or 4, tensor parallelism, fsdp.
  const std::string config = MakeTempDir("autoaccel-qwen3-moe-") + "/config.json";
  WriteFile(config, R"({"model_type": "qwen3_moe", "hidden_size": 32, "intermediate_size": 64,
                        "moe_intermediate_size": 16, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                        "vocab_size": 96, "max_position_embeddings": 64, "num_experts": 8,
                        "num_experts_per_tok": 2, "mlp_only_layers": [0]})");
  const std::vector<std::string> args = {
      "tune",  "--model",          "qwen3_moe",   "--model-config",
      config,  "--seq-len",        "16",          "--global-batch-size",
      "8",     "--world-size",     "4",           "--tp-sizes",
      "1,2",   "--pp-sizes",       "1",           "--ep-sizes",
      "1,2,4", "--shardings",      "none,fsdp",   "--precisions",
      "fp32",  "--attentions",     "math",        "--checkpointings",
      "none",  "--optimizers",     "fused_adamw", "--micro-batch-sizes",
      "2",     "--time-limit",     "5m",          "--warmup-steps",
      "1",     "--measured-steps", "2",           "--json"};
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  std::set<std::string> layouts;
  for (const json& t : job["trials"]) {
    EXPECT_EQ(t["status"], "SUCCEEDED") << t.dump();
    const json& s = t["strategy_json"];
    layouts.insert(absl::StrCat("tp", s["tensor_parallel"].get<int>(), "_ep",
                                s["expert_parallel"].get<int>(), "_",
                                s["sharding"].get<std::string>()));
  }
  // Every layout of the lists that the rules allow (tp2 leaves 2
  // data-parallel ranks: ep 4 does not fit there).
  EXPECT_EQ(layouts,
            (std::set<std::string>{"tp1_ep1_none", "tp1_ep2_none", "tp1_ep4_none", "tp1_ep1_fsdp",
                                   "tp1_ep2_fsdp", "tp1_ep4_fsdp", "tp2_ep1_none", "tp2_ep2_none",
                                   "tp2_ep1_fsdp", "tp2_ep2_fsdp"}));
  ASSERT_TRUE(job["best"].is_object()) << out;
  EXPECT_TRUE(layouts.count(
      absl::StrCat("tp", job["best"]["strategy_json"]["tensor_parallel"].get<int>(), "_ep",
                   job["best"]["strategy_json"]["expert_parallel"].get<int>(), "_",
                   job["best"]["strategy_json"]["sharding"].get<std::string>())));
}

TEST(EndToEnd, TorchScriptModelIsTunedFromItsFile) {
  const char* models = std::getenv("AUTOACCEL_SCRIPTED_MODELS");
  ASSERT_NE(models, nullptr) << "the scripted_models fixture sets AUTOACCEL_SCRIPTED_MODELS";
  const std::string file = absl::StrCat(models, "/tiny_lm.pt");
  ASSERT_TRUE(std::filesystem::exists(file)) << file;
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));

  const std::vector<std::string> model = {
      "--model",   "torchscript",  "--model-file",
      file,        "--input-spec", "input_ids:int64[B,T]<64; labels=input_ids",
      "--seq-len", "16",           "--global-batch-size",
      "4"};
  std::vector<std::string> args = {"tune"};
  args.insert(args.end(), model.begin(), model.end());
  for (const char* a : {"--time-limit", "3m", "--precisions", "bf16,fp32", "--optimizers",
                        "fused_adamw", "--warmup-steps", "3", "--measured-steps", "2", "--json"}) {
    args.push_back(a);
  }
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  // 2 precisions x micro-batches 4, 2, 1; no checkpointing or attention
  // choices for a module the runner cannot look inside; then the best three
  // again.
  ExpectSearchThenRepeats(job, 6);
  for (const json& t : job["trials"]) {
    EXPECT_EQ(t["status"], "SUCCEEDED") << t.dump();
    EXPECT_EQ(t["strategy_json"]["checkpointing"], "none");
    EXPECT_EQ(t["strategy_json"]["attention"], "math");
    EXPECT_GT(t["metrics"]["tokens_per_second"].get<double>(), 0);
    EXPECT_GT(t["metrics"]["achieved_tflops"].get<double>(), 0);
    // The worker's --peak-tflops reached the trial: MFU against its precision.
    const double peak = t["strategy_json"]["precision"] == "bf16" ? 0.4 : 0.1;
    EXPECT_EQ(t["metrics"]["peak_tflops"].get<double>(), peak);
    EXPECT_NEAR(t["metrics"]["mfu"].get<double>(),
                t["metrics"]["achieved_tflops"].get<double>() / peak, 1e-9);
  }
  // The file itself is not echoed back (nor stored in the jobs table); the
  // coordinator kept it on disk only while the job ran, and the worker
  // received it once (StoreModelFile), in a directory only it can reach.
  EXPECT_FALSE(job["request"]["model"].contains("script")) << job["request"].dump();
  EXPECT_THAT(cluster.Query("SELECT request_json FROM jobs"),
              ::testing::Each(::testing::Not(HasSubstr("\"script\""))));
  const std::string kept = cluster.dir() + "/autoaccel.db.model-files";
  ASSERT_TRUE(std::filesystem::is_directory(kept));
  EXPECT_TRUE(std::filesystem::is_empty(kept));
  EXPECT_EQ(std::filesystem::status(kept).permissions(), std::filesystem::perms::owner_all);
  EXPECT_EQ(std::filesystem::status(cluster.dir() + "/models").permissions(),
            std::filesystem::perms::owner_all);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cluster.dir() + "/models"),
                          std::filesystem::directory_iterator()),
            1);

  // The same file answers `best`; another file (a different digest) does not.
  std::vector<std::string> best_args = {"best"};
  best_args.insert(best_args.end(), model.begin(), model.end());
  ASSERT_EQ(cluster.Cli(best_args, &out, &err), 0) << out << err;
  EXPECT_THAT(out, HasSubstr(job["best"]["strategy"].get<std::string>()));
  best_args[4] = absl::StrCat(models, "/dict_loss.pt");
  EXPECT_EQ(cluster.Cli(best_args, &out, &err), 3) << out << err;

  // A bad input spec is refused naming it.
  args[6] = "input_ids:int8[B,T]<64";
  EXPECT_EQ(cluster.Cli(args, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("input_spec"));
}

TEST(EndToEnd, TuneIntoOneStreamPrintsEachRowAndTheFinalStateLineOnce) {
  // `tune ... 2>&1` (as a terminal shows it): the rows and the state line
  // went to stderr as they came, so the summary on stdout repeats neither.
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  std::string command = absl::StrCat(AUTOACCEL_CLI_BIN, " --server ", cluster.address());
  for (const std::string& a :
       cluster.TuneArgs(4, {"--time-limit", "60s", "--max-trials", "2", "--warmup-steps", "1",
                            "--measured-steps", "1", "--min-measured-time", "10ms"})) {
    absl::StrAppend(&command, " '", a, "'");
  }
  std::string out, err;
  ASSERT_EQ(
      RunCommand({"/bin/sh", "-c", command + " 2>&1"}, cluster.dir(), &out, &err, absl::Minutes(2)),
      0)
      << out << err;
  auto count = [&out](const std::string& needle) {
    int n = 0;
    for (size_t at = out.find(needle); at != std::string::npos; at = out.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count(": SUCCEEDED \xe2\x80\x94 "), 1) << out;
  EXPECT_EQ(count("\n   0  SUCCEEDED"), 1) << out;
  EXPECT_EQ(count("\n   1  SUCCEEDED"), 1) << out;
  EXPECT_EQ(count("  elapsed "), 1) << out;
}

TEST(EndToEnd, JobWaitsForAWorkerThenRuns) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  std::vector<std::string> args =
      cluster.TuneArgs(4, {"--time-limit", "2m", "--max-trials", "2", "--warmup-steps", "1",
                           "--measured-steps", "1", "--detach", "--json"});
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  const std::string job_id = ParseJson(out)["job_id"];

  // Without workers the job says what it waits for.
  json job;
  const absl::Time end = absl::Now() + absl::Seconds(10);
  while (absl::Now() < end) {
    ASSERT_EQ(cluster.Cli({"job", job_id, "--json"}, &out), 0);
    job = ParseJson(out);
    if (job["state"] == "WAITING_FOR_WORKERS") break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(job["state"], "WAITING_FOR_WORKERS");
  EXPECT_THAT(job["status_message"].get<std::string>(), HasSubstr("waiting for a worker"));

  cluster.StartWorker("late");
  ASSERT_EQ(cluster.Cli({"watch", job_id, "--json"}, &out, &err), 0) << out << err;
  job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  ExpectSearchThenRepeats(job, 2);  // and both measured again
}

TEST(EndToEnd, JobWithoutWorkersEndsAtItsTimeLimit) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  std::vector<std::string> args = {"tune"};
  for (const std::string& a : cluster.ModelArgs()) args.push_back(a);
  for (const char* a : {"--time-limit", "3s", "--json"}) args.push_back(a);
  std::string out, err;
  const absl::Time start = absl::Now();
  EXPECT_EQ(cluster.Cli(args, &out, &err), 1) << out << err;
  EXPECT_LT(absl::Now() - start, absl::Seconds(3 + 5));
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_THAT(job["status_message"].get<std::string>(), HasSubstr("time limit"));
  EXPECT_TRUE(job["best"].is_null());
}

TEST(EndToEnd, KilledWorkerFailsItsTrialAndTheJobGoesOn) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  Subprocess* doomed = cluster.StartWorker("doomed");
  cluster.StartWorker("steady");
  ASSERT_TRUE(cluster.WaitForWorkers(2));
  std::vector<std::string> args = {"tune"};
  for (const std::string& a : cluster.ModelArgs()) args.push_back(a);
  // Long enough trials that one is surely running on the doomed worker.
  for (const char* a : {"--time-limit", "90s", "--max-trials", "3", "--warmup-steps", "1",
                        "--measured-steps", "300", "--detach", "--json"}) {
    args.push_back(a);
  }
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  const std::string job_id = ParseJson(out)["job_id"];

  bool running_on_doomed = false;
  const absl::Time end = absl::Now() + absl::Seconds(20);
  while (!running_on_doomed && absl::Now() < end) {
    ASSERT_EQ(cluster.Cli({"workers", "--json"}, &out), 0);
    const json workers = ParseJson(out);
    for (const json& w : workers["workers"]) {
      if (w["worker_id"] == "doomed" &&
          !w["devices"][0]["held_by_trial"].get<std::string>().empty()) {
        running_on_doomed = true;
      }
    }
    if (!running_on_doomed) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(running_on_doomed);
  doomed->Signal(SIGKILL);

  const absl::Time start = absl::Now();
  ASSERT_EQ(cluster.Cli({"watch", job_id, "--json"}, &out, &err), 0) << out << err;
  EXPECT_LT(absl::Now() - start, absl::Seconds(90 + 5));
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "SUCCEEDED") << out;
  // The trial the dead worker held is no measurement of its strategy: it ran
  // again on the steady worker, as attempt 2.
  int retried = 0;
  for (const json& t : job["trials"]) {
    EXPECT_EQ(t["status"], "SUCCEEDED") << t.dump();
    if (!t["failed_attempts"].empty()) {
      ++retried;
      EXPECT_THAT(t["failed_attempts"][0].get<std::string>(), HasSubstr("doomed")) << t.dump();
      EXPECT_EQ(t["attempt"], 2) << t.dump();
      EXPECT_EQ(t["worker_ids"][0], "steady") << t.dump();
    }
  }
  EXPECT_EQ(retried, 1) << out;
  EXPECT_EQ(job["infrastructure_failures"], 1) << out;
  EXPECT_EQ(job["trials_lost"], 0) << out;
  EXPECT_FALSE(job["partial_evidence"].get<bool>()) << out;
}

// README's setup: two workers on one host, each offering the default port
// range. Gangs of both run side by side and never meet on one port; a port
// some other process holds costs no trial (it is retried on another port).
TEST(EndToEnd, WorkersSharingAHostAndItsPortRangeRunGangsWithoutRendezvousFailures) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  const int first = FreePort();
  const std::string ports = absl::StrCat(first, "-", first + 40);
  cluster.StartWorker("w1", "cpu:2", ports);
  cluster.StartWorker("w2", "cpu:2", ports);
  ASSERT_TRUE(cluster.WaitForWorkers(2));
  // Another program takes the range's first port before the job starts.
  const int squatter = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(first));
  const bool squatting = ::bind(squatter, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                         ::listen(squatter, 1) == 0;
  for (const char* world : {"2", "4"}) {
    std::vector<std::string> args = cluster.TuneArgs(8, {"--world-size",
                                                         world,
                                                         "--pp-sizes",
                                                         "1",
                                                         "--sequence-parallel",
                                                         "off",
                                                         "--precisions",
                                                         "fp32",
                                                         "--attentions",
                                                         "sdpa",
                                                         "--checkpointings",
                                                         "none",
                                                         "--optimizers",
                                                         "fused_adamw",
                                                         "--micro-batch-sizes",
                                                         "1,2",
                                                         "--algorithm",
                                                         "exhaustive",
                                                         "--max-trials",
                                                         "6",
                                                         "--time-limit",
                                                         "3m",
                                                         "--warmup-steps",
                                                         "1",
                                                         "--measured-steps",
                                                         "2",
                                                         "--json"});
    std::string out, err;
    ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
    json job = ParseJson(out);
    EXPECT_EQ(job["state"], "SUCCEEDED") << out;
    EXPECT_FALSE(job["partial_evidence"].get<bool>()) << out;
    EXPECT_EQ(job["trials_lost"], 0) << out;
    ExpectSearchThenRepeats(job, 6);  // six, and the best three again
    for (const json& t : job["trials"]) {
      EXPECT_EQ(t["status"], "SUCCEEDED") << "world " << world << ": " << t.dump();
      for (const json& f : t["failed_attempts"]) {
        // Only the squatted port may cost an attempt, never a shared one.
        EXPECT_THAT(f.get<std::string>(), HasSubstr(absl::StrCat(first))) << t.dump();
      }
    }
  }
  if (squatting) ::close(squatter);
}

// A job of a size people run (a 7B model on 8 ranks: tens of thousands of
// candidates) stays visible: tune, watch and trials answer to the end, every
// answer small. Nothing runs: the devices are far too small for 7B.
TEST(EndToEnd, AJobOfTensOfThousandsOfCandidatesCanBeWatchedToItsEnd) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  for (const char* w : {"big1", "big2"}) {
    cluster.StartWorker(w, "cpu:4", "", {"--device-memory", "1073741824"});
  }
  ASSERT_TRUE(cluster.WaitForWorkers(2));
  const std::string config = cluster.dir() + "/llama-7b.json";
  WriteFile(config, R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5})");
  std::vector<std::string> args = {"tune",         "--model",      "llama", "--model-config",
                                   config,         "--seq-len",    "4096",  "--global-batch-size",
                                   "256",          "--world-size", "8",     "--checkpoint-percents",
                                   "25,50,75,100", "--time-limit", "5m",    "--json"};
  std::string out, err;
  const absl::Time start = absl::Now();
  EXPECT_EQ(cluster.Cli(args, &out, &err), 1) << err;  // no trial could run
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "FAILED") << err;
  EXPECT_LT(absl::Now() - start, absl::Seconds(120));
  const int total = job["trials_total"].get<int>();
  EXPECT_GT(total, 40000) << job.dump().substr(0, 2000);
  EXPECT_EQ(job["trials_pruned"].get<int>(), total);
  EXPECT_TRUE(job["trials"].empty()) << "pruned candidates are summarised, not listed";
  ASSERT_FALSE(job["pruned_summary"].empty());
  int summarised = 0;
  for (const json& p : job["pruned_summary"]) summarised += p["count"].get<int>();
  EXPECT_EQ(summarised, total);
  EXPECT_EQ(job["pruned_summary"][0]["kind"], "predicted not to fit");
  EXPECT_LT(out.size(), 200000u);
  EXPECT_THAT(err, Not(HasSubstr("larger than max")));

  const std::string job_id = job["job_id"];
  ASSERT_EQ(cluster.Cli({"watch", job_id}, &out, &err), 1) << err;
  EXPECT_THAT(err, HasSubstr("predicted not to fit"));
  EXPECT_THAT(out, HasSubstr("PRUNED, predicted not to fit"));
  ASSERT_EQ(cluster.Cli({"job", job_id, "--json"}, &out, &err), 0) << err;
  ASSERT_EQ(cluster.Cli({"jobs", "--json"}, &out, &err), 0) << err;
  // Every candidate, page by page, when asked for.
  ASSERT_EQ(cluster.Cli({"trials", job_id, "--include-pruned", "--json"}, &out, &err), 0) << err;
  EXPECT_EQ(ParseJson(out)["trials"].size(), static_cast<size_t>(total));
}

TEST(EndToEnd, CancelStopsRunningTrialsAndFreesTheDevice) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  std::vector<std::string> args = {"tune"};
  for (const std::string& a : cluster.ModelArgs()) args.push_back(a);
  // One trial that would run for minutes.
  for (const char* a : {"--time-limit", "10m", "--max-trials", "1", "--measured-steps", "10000",
                        "--min-measured-time", "5m", "--detach", "--json"}) {
    args.push_back(a);
  }
  std::string out, err;
  ASSERT_EQ(cluster.Cli(args, &out, &err), 0) << out << err;
  const std::string job_id = ParseJson(out)["job_id"];
  auto device_holder = [&]() -> std::string {
    std::string w;
    if (cluster.Cli({"workers", "--json"}, &w) != 0) return "?";
    const json workers = ParseJson(w);
    return workers["workers"][0]["devices"][0]["held_by_trial"];
  };
  absl::Time end = absl::Now() + absl::Seconds(20);
  while (device_holder().empty() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(100));
  ASSERT_FALSE(device_holder().empty());

  ASSERT_EQ(cluster.Cli({"cancel", job_id, "--json"}, &out, &err), 0) << out << err;
  json job = ParseJson(out);
  EXPECT_EQ(job["state"], "CANCELLED");
  ASSERT_EQ(cluster.Cli({"trials", job_id, "--json"}, &out, &err), 0);
  json trials = ParseJson(out);
  ASSERT_EQ(trials["trials"].size(), 1u);
  EXPECT_EQ(trials["trials"][0]["status"], "CANCELLED");
  // The worker stops the trial process and gives the device back.
  end = absl::Now() + absl::Seconds(15);
  while (!device_holder().empty() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(device_holder().empty());
}

TEST(EndToEnd, BadInputIsRejectedNamingTheFieldAndNothingIsStored) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  std::string out, err;
  const std::string broken = cluster.dir() + "/broken.json";
  WriteFile(broken, R"({"n_layer": 2, "n_embd": 32, "vocab_size": 64, "n_positions": 32})");
  EXPECT_EQ(cluster.Cli({"tune", "--model", "gpt2", "--model-config", broken, "--seq-len", "16",
                         "--global-batch-size", "4", "--time-limit", "1m"},
                        &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("n_head"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  EXPECT_EQ(cluster.Cli({"tune", "--model", "gpt5", "--model-config", cluster.config(), "--seq-len",
                         "16", "--global-batch-size", "4", "--time-limit", "1m"},
                        &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("model"));
  EXPECT_THAT(err, HasSubstr("gpt2"));

  EXPECT_EQ(cluster.Cli({"tune", "--model", "gpt2", "--model-config", cluster.config(), "--seq-len",
                         "16", "--global-batch-size", "4", "--time-limit", "0s"},
                        &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("time_limit"));

  EXPECT_EQ(
      cluster.Cli({"tune", "--model", "gpt2", "--model-config", cluster.config(), "--seq-len", "16",
                   "--global-batch-size", "6", "--micro-batch-sizes", "4", "--time-limit", "1m"},
                  &out, &err),
      1);
  EXPECT_THAT(err, HasSubstr("global_batch_size"));

  // Overrides are applied to the config before it is validated.
  EXPECT_EQ(
      cluster.Cli({"tune", "--model", "gpt2", "--model-config", cluster.config(), "--override",
                   "n_head=3", "--seq-len", "16", "--global-batch-size", "4", "--time-limit", "1m"},
                  &out, &err),
      1);
  EXPECT_THAT(err, HasSubstr("n_head"));
  EXPECT_EQ(cluster.Cli({"tune", "--model", "gpt2", "--model-config", cluster.config(),
                         "--override", "no-equals-sign", "--seq-len", "16", "--global-batch-size",
                         "4", "--time-limit", "1m"},
                        &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("override"));

  // A flag the CLI does not know, or a missing value: exit code 1, as documented.
  EXPECT_EQ(cluster.Cli({"tune", "--no-such-flag"}, &out, &err), 1) << err;
  EXPECT_EQ(cluster.Cli({"trials"}, &out, &err), 1) << err;
  // A directory where a config file belongs says so.
  EXPECT_EQ(cluster.Cli({"tune", "--model", "gpt2", "--model-config", cluster.dir(), "--seq-len",
                         "16", "--global-batch-size", "4", "--time-limit", "1m"},
                        &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("is a directory"));
  // Three ranks cannot split a batch of 4: the message says so, not only
  // which model-parallel rule the remaining layouts broke.
  EXPECT_EQ(
      cluster.Cli({"tune", "--model", "gpt2", "--model-config", cluster.config(), "--seq-len", "16",
                   "--global-batch-size", "4", "--world-size", "3", "--time-limit", "1m"},
                  &out, &err),
      1);
  EXPECT_THAT(err, HasSubstr("global_batch_size 4 is not divisible"));
  // Numbers that would never end.
  EXPECT_EQ(cluster.Cli({"tune", "--model", "gpt2", "--model-config", cluster.config(), "--seq-len",
                         "16", "--global-batch-size", "4", "--time-limit", "1m", "--measured-steps",
                         "2147483647"},
                        &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("measured_steps"));

  EXPECT_THAT(cluster.Query("SELECT job_id FROM jobs"), ::testing::IsEmpty());
}

TEST(EndToEnd, AWorkerGivenGpusThisMachineDoesNotListRefusesToStart) {
  const std::string dir = MakeTempDir("autoaccel-worker-");
  std::string out, err;
  // No machine here lists a GPU 63; a test may still simulate one.
  const int code = RunCommand({AUTOACCEL_WORKER_BIN, "--coordinator", "127.0.0.1:1", "--devices",
                               "cuda:63", "--work-dir", dir, "--peak-tflops", "bf16=1"},
                              dir, &out, &err, absl::Seconds(60));
  EXPECT_EQ(code, 2) << out << err;
  EXPECT_THAT(err, HasSubstr("cuda:63"));
  EXPECT_THAT(err, HasSubstr("nvidia-smi does not list"));
  std::filesystem::remove_all(dir);
}

// `report` of a tuned job: one HTML file with every section, every trial
// that ran, the device-memory figure of the worker that ran it, and nothing
// loaded from elsewhere; an unknown job is one clear line and exit 1.
TEST(EndToEnd, ReportOfATunedJobIsOneSelfContainedHtmlFile) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  std::string out, err;
  ASSERT_EQ(
      cluster.Cli(cluster.TuneArgs(4, {"--time-limit", "3m", "--max-trials", "3", "--warmup-steps",
                                       "1", "--measured-steps", "2", "--json"}),
                  &out, &err),
      0)
      << out << err;
  json job = ParseJson(out);
  const std::string job_id = job["job_id"];

  const std::string path = cluster.dir() + "/report.html";
  ASSERT_EQ(cluster.Cli({"report", job_id, "--html", path, "--json"}, &out, &err), 0) << out << err;
  json written = ParseJson(out);
  EXPECT_EQ(written["html"], path);
  EXPECT_EQ(written["trials"], job["trials"].size());
  const std::string html = ::autoaccel::testing::ReadFile(path);
  EXPECT_EQ(written["bytes"], html.size());
  for (const char* id : {"settings", "answer", "throughput-memory", "best-over-time",
                         "predicted-measured", "dimensions", "trials"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<section id=\"", id, "\">"))) << id;
  }
  EXPECT_THAT(html, HasSubstr(job_id));
  for (const json& t : job["trials"]) {
    EXPECT_THAT(html, HasSubstr(t["strategy"].get<std::string>())) << t.dump();
  }
  // w1 ran the trials and is registered with a cpu device of known memory.
  EXPECT_THAT(html,
              HasSubstr("the smallest memory of the cpu devices that ran this job (w1 cpu:0)"));
  EXPECT_THAT(html, Not(HasSubstr("src=\"")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));

  EXPECT_EQ(cluster.Cli({"report", "job-nosuch", "--html", path + ".2"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("not found"));
  EXPECT_FALSE(std::filesystem::exists(path + ".2"));
}

TEST(EndToEnd, UnreachableServerGivesOneClearLine) {
  const std::string dir = MakeTempDir("autoaccel-cli-");
  std::string out, err;
  int code = RunCommand({AUTOACCEL_CLI_BIN, "--server", "127.0.0.1:1", "jobs"}, dir, &out, &err,
                        absl::Seconds(30));
  EXPECT_NE(code, 0);
  EXPECT_LT(code, 128) << "crashed: " << err;
  EXPECT_THAT(err, HasSubstr("cannot reach the autoaccel server at 127.0.0.1:1"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

}  // namespace
}  // namespace autoaccel
