// The coordinator's HTTP port end to end: a real autoaccel-server with
// --http-listen, real workers and a real tune, scraped as Prometheus would
// (over HTTP, checked by promtool) while the job runs and after it ended.
#include <httplib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/e2e_cluster.h"
#include "tests/promtool.h"

namespace autoaccel::e2e {
namespace {

using ::autoaccel::testing::Promtool;
using ::testing::HasSubstr;

// name{labels} -> value of every sample of an exposition.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      ADD_FAILURE() << "not a sample: " << line;
      continue;
    }
    samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}

// The HTTP port the server printed, as host and port.
struct HttpAddress {
  std::string host;
  int port = 0;
};
HttpAddress HttpAddressOf(Subprocess* server) {
  const std::string address =
      AddressFromLine(server->WaitForLine("http listening on", absl::Seconds(20)));
  HttpAddress out;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return out;
  out.host = address.substr(0, colon);
  if (!absl::SimpleAtoi(address.substr(colon + 1), &out.port)) out.port = 0;
  return out;
}

// /readyz polled until 200: the HTTP port opens before the scheduler starts,
// and until then it answers 503 saying so. The last status seen.
int WaitUntilReady(httplib::Client& client) {
  int status = 0;
  const absl::Time end = absl::Now() + absl::Seconds(20);
  while (absl::Now() < end) {
    auto got = client.Get("/readyz");
    status = got ? got->status : 0;
    if (status == 200) break;
    if (got) EXPECT_THAT(got->body, HasSubstr("starting: the scheduler is not running yet"));
    absl::SleepFor(absl::Milliseconds(100));
  }
  return status;
}

// Every line of a --log-format json log: one JSON object each.
std::vector<json> JsonLines(const std::string& log) {
  std::vector<json> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    json j = json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
    if (j.is_object()) lines.push_back(std::move(j));
  }
  return lines;
}

TEST(Monitoring, PrometheusScrapesTheCoordinatorWhileAJobRuns) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer({"--http-listen", "127.0.0.1:0", "--log-format", "json"}));
  const HttpAddress http = HttpAddressOf(cluster.server());
  ASSERT_GT(http.port, 0) << cluster.server()->Stdout();
  httplib::Client client(http.host, http.port);
  client.set_read_timeout(10);

  auto healthz = client.Get("/healthz");
  ASSERT_TRUE(healthz) << "no answer from " << http.host << ":" << http.port;
  EXPECT_EQ(healthz->status, 200);
  EXPECT_EQ(WaitUntilReady(client), 200);
  EXPECT_EQ(client.Get("/nothing-here")->status, 404);
  EXPECT_EQ(client.Post("/metrics", "", "text/plain")->status, 405);

  Subprocess* w1 = cluster.StartWorker("w1", "cpu:1", "", {"--log-format", "json"});
  cluster.StartWorker("w2");
  ASSERT_TRUE(cluster.WaitForWorkers(2));
  auto before = client.Get("/metrics");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  std::map<std::string, double> samples = Samples(before->body);
  EXPECT_EQ(samples["autoaccel_workers{state=\"healthy\"}"], 2);
  EXPECT_EQ(samples["autoaccel_devices{type=\"cpu\",state=\"free\"}"], 2);

  std::vector<std::string> args =
      cluster.TuneArgs(4, {"--time-limit", "2m", "--max-trials", "4", "--warmup-steps", "1",
                           "--measured-steps", "2", "--json"});
  std::unique_ptr<Subprocess> tune = cluster.StartCli(args, "tune");
  // Scraped as the job runs: the devices its trials hold show.
  double most_held = 0, most_running = 0, most_in_flight = 0;
  const absl::Time end = absl::Now() + absl::Minutes(2);
  std::string during;
  while (absl::Now() < end) {
    auto scrape = client.Get("/metrics");
    ASSERT_TRUE(scrape);
    samples = Samples(scrape->body);
    if (samples["autoaccel_devices{type=\"cpu\",state=\"held\"}"] > most_held) {
      during = scrape->body;
    }
    most_held = std::max(most_held, samples["autoaccel_devices{type=\"cpu\",state=\"held\"}"]);
    most_running = std::max(most_running, samples["autoaccel_trials_running"]);
    most_in_flight = std::max(most_in_flight, samples["autoaccel_rank_calls_in_flight"]);
    if (samples["autoaccel_jobs_finished_total{state=\"SUCCEEDED\"}"] >= 1) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(tune->Wait(absl::Minutes(1)), 0) << tune->Stdout() << tune->Stderr();
  EXPECT_GE(most_held, 1);
  EXPECT_GE(most_running, 1);
  EXPECT_GE(most_in_flight, 1);
  std::string findings;
  EXPECT_EQ(Promtool(cluster.dir(), during, &findings), 0) << findings << "\n" << during;

  // After the job: every trial it recorded is counted once, by status.
  json job = ParseJson(tune->Stdout());
  ASSERT_EQ(job["state"], "SUCCEEDED") << tune->Stdout();
  std::map<std::string, int> by_status;
  int ran = 0;
  for (const json& t : job["trials"]) {
    ++by_status[t["status"].get<std::string>()];
    if (t["started_at"].get<double>() > 0) ++ran;
  }
  auto after = client.Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_EQ(Promtool(cluster.dir(), after->body, &findings), 0) << findings << "\n" << after->body;
  samples = Samples(after->body);
  EXPECT_EQ(samples["autoaccel_jobs_finished_total{state=\"SUCCEEDED\"}"], 1);
  EXPECT_EQ(samples["autoaccel_jobs{state=\"RUNNING\"}"], 0);
  double counted = 0;
  for (const auto& [series, value] : samples) {
    if (absl::StartsWith(series, "autoaccel_trials_finished_total{")) counted += value;
  }
  EXPECT_EQ(counted, static_cast<double>(job["trials"].size())) << after->body;
  EXPECT_EQ(samples["autoaccel_trials_finished_total{status=\"SUCCEEDED\",outcome=\"measured\"}"],
            by_status["SUCCEEDED"]);
  EXPECT_EQ(samples["autoaccel_trial_duration_seconds_count"], ran) << after->body;
  EXPECT_GE(samples["autoaccel_dispatch_wait_seconds_count"], ran);
  EXPECT_GT(samples["autoaccel_store_write_seconds_count"], job["trials"].size());
  EXPECT_EQ(samples["autoaccel_devices{type=\"cpu\",state=\"free\"}"], 2);
  EXPECT_EQ(samples["autoaccel_trials_running"], 0);
  EXPECT_EQ(samples["autoaccel_rank_calls_in_flight"], 0);

  // Structured logs: every line on stdout is one JSON object (the
  // "listening on" announcements too); the lines about a trial carry its
  // job and trial ids, the worker's its trial id and rank.
  const std::string job_id = job["job_id"];
  int trial_lines = 0;
  for (const json& line : JsonLines(cluster.server()->Stdout())) {
    EXPECT_EQ(line["process"], "autoaccel-server");
    EXPECT_TRUE(line.contains("time") && line.contains("level") && line.contains("message"));
    if (line.contains("trial_id")) {
      ++trial_lines;
      EXPECT_EQ(line["job_id"], job_id) << line.dump();
      EXPECT_TRUE(absl::StartsWith(line["trial_id"].get<std::string>(), job_id + "-t"));
    }
  }
  EXPECT_GE(trial_lines, ran) << cluster.server()->Stdout();
  int rank_lines = 0;
  for (const json& line : JsonLines(w1->Stdout())) {
    EXPECT_EQ(line["process"], "autoaccel-worker");
    if (line.contains("trial_id")) {
      ++rank_lines;
      EXPECT_EQ(line["rank"], 0) << line.dump();
    }
  }
  EXPECT_GT(rank_lines, 0) << w1->Stdout();
}

// /readyz reflects the database: deleted under the running server, the
// coordinator is not ready (and says why), while /healthz still answers.
TEST(Monitoring, ReadyzSaysWhenTheDatabaseIsGone) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer({"--http-listen", "127.0.0.1:0"}));
  const HttpAddress http = HttpAddressOf(cluster.server());
  ASSERT_GT(http.port, 0);
  httplib::Client client(http.host, http.port);
  ASSERT_EQ(WaitUntilReady(client), 200);
  std::filesystem::remove(cluster.dir() + "/autoaccel.db");
  auto r = client.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(r->body, ::testing::AllOf(HasSubstr("database unusable"), HasSubstr("was deleted")));
  auto healthz = client.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
}

TEST(Monitoring, ABadOrTakenHttpAddressStopsTheServerWithAClearError) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer({"--http-listen", "127.0.0.1:0"}));
  const HttpAddress http = HttpAddressOf(cluster.server());
  ASSERT_GT(http.port, 0);
  std::string out, err;
  const std::string db = cluster.dir() + "/second.db";
  EXPECT_EQ(RunCommand({AUTOACCEL_SERVER_BIN, "--listen", "127.0.0.1:0", "--db", db,
                        "--http-listen", absl::StrCat("127.0.0.1:", http.port)},
                       cluster.dir(), &out, &err, absl::Seconds(20)),
            2);
  EXPECT_THAT(err,
              HasSubstr(absl::StrCat("--http-listen: cannot listen on 127.0.0.1:", http.port)));
  EXPECT_EQ(RunCommand({AUTOACCEL_SERVER_BIN, "--listen", "127.0.0.1:0", "--db", db,
                        "--http-listen", "localhost"},
                       cluster.dir(), &out, &err, absl::Seconds(20)),
            2);
  EXPECT_THAT(err, HasSubstr("--http-listen: 'localhost' is not HOST:PORT"));
}

}  // namespace
}  // namespace autoaccel::e2e
