// The cluster's protections end to end: certificates and tokens issued by
// deploy/tls/make-certs and make-tokens, a real server and worker over TLS
// with tokens, and the CLI as three users; a worker's trial service called
// directly; daemons asked to serve a network address unprotected; the HTTP
// port over HTTPS, and its Host check without tokens.
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/autoaccel.grpc.pb.h"
#include "tests/e2e_cluster.h"

namespace autoaccel::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Issues a CA, certificates for the coordinator and worker w1 (both on
// 127.0.0.1), tokens for alice, carol and root (admin) and a join token,
// into `dir` with the deploy scripts; false if a script failed.
bool IssueCredentials(const std::string& dir) {
  std::string out, err;
  const std::string tls = std::string(AUTOACCEL_SOURCE_DIR) + "/deploy/tls/";
  if (RunCommand({tls + "make-certs", dir, "coordinator=127.0.0.1,localhost", "w1=127.0.0.1"}, dir,
                 &out, &err, absl::Seconds(60)) != 0) {
    ADD_FAILURE() << out << err;
    return false;
  }
  if (RunCommand({tls + "make-tokens", dir, "alice", "carol", "root:admin"}, dir, &out, &err,
                 absl::Seconds(60)) != 0) {
    ADD_FAILURE() << out << err;
    return false;
  }
  return true;
}

std::vector<std::string> ServerFlags(const std::string& d) {
  return {"--tls-cert",        d + "/coordinator.pem", "--tls-key", d + "/coordinator.key",
          "--tls-ca",          d + "/ca.pem",          "--tokens",  d + "/tokens",
          "--join-token-file", d + "/join-token"};
}
std::vector<std::string> WorkerFlags(const std::string& d) {
  return {"--tls-cert", d + "/w1.pem", "--tls-key",         d + "/w1.key",
          "--tls-ca",   d + "/ca.pem", "--join-token-file", d + "/join-token"};
}

TEST(SecurityEndToEnd, ATlsClusterWithTokensTunesForItsUserAndRefusesEveryoneElse) {
  Cluster cluster;
  const std::string d = cluster.dir();
  ASSERT_TRUE(IssueCredentials(d));
  ASSERT_TRUE(cluster.StartServer(ServerFlags(d)));
  Subprocess* worker = cluster.StartWorker("w1", "cpu:1", "", WorkerFlags(d));
  const std::string worker_address =
      AddressFromLine(worker->WaitForLine("listening on", absl::Seconds(20)));
  ASSERT_FALSE(worker_address.empty());

  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/alice.token"};
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  std::string out, err;
  ASSERT_EQ(
      cluster.Cli(cluster.TuneArgs(4, {"--time-limit", "2m", "--max-trials", "2", "--warmup-steps",
                                       "1", "--measured-steps", "1", "--json"}),
                  &out, &err),
      0)
      << out << err;
  const json job = ParseJson(out);
  ASSERT_EQ(job["state"], "SUCCEEDED") << out;
  const std::string job_id = job["job_id"];
  EXPECT_EQ(job["owner"], "alice") << out;
  ASSERT_EQ(cluster.Cli({"workers"}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("w1 at " + worker_address + " TLS"));
  EXPECT_THAT(out, Not(HasSubstr("INSECURE")));

  // No token: refused, and the message says where a token goes.
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem"};
  EXPECT_EQ(cluster.Cli({"jobs"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("not authenticated"));
  EXPECT_THAT(err, HasSubstr("--token"));
  // Carol: alice's job is not hers to see or cancel, and her list is empty.
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/carol.token"};
  for (const char* command : {"job", "cancel", "trials"}) {
    EXPECT_EQ(cluster.Cli({command, job_id}, &out, &err), 1) << command;
    EXPECT_THAT(err, HasSubstr("permission denied")) << command;
  }
  ASSERT_EQ(cluster.Cli({"jobs", "--json"}, &out, &err), 0) << err;
  EXPECT_THAT(ParseJson(out)["jobs"], ::testing::IsEmpty()) << out;
  // The admin, with the token in the environment's place: every job.
  const std::string root_token = testing::ReadFile(d + "/root.token");
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token",
                       root_token.substr(0, root_token.find('\n'))};
  ASSERT_EQ(cluster.Cli({"job", job_id, "--json"}, &out, &err), 0) << err;
  EXPECT_EQ(ParseJson(out)["owner"], "alice");
  // Plaintext against the TLS port: no answer at all.
  cluster.cli_flags = {"--token-file", d + "/alice.token", "--rpc-timeout", "3s"};
  EXPECT_EQ(cluster.Cli({"jobs"}, &out, &err), 1);
  EXPECT_THAT(err, Not(HasSubstr(root_token.substr(0, 16)))) << "a token is never printed";

  // The worker's trial service, called directly with the join token or a
  // user's token instead of its coordinator's session: refused.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = testing::ReadFile(d + "/ca.pem");
  auto stub =
      v1::WorkerService::NewStub(grpc::CreateChannel(worker_address, grpc::SslCredentials(ssl)));
  for (const std::string file : {"join-token", "alice.token"}) {
    const std::string token = testing::ReadFile(d + "/" + file);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token.substr(0, token.find('\n')));
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RunTrialRequest request;
    request.set_trial_id("forged");
    request.set_attempt(1);
    v1::RunTrialResponse response;
    grpc::Status s = stub->RunTrial(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << file << ": " << s.error_message();
  }
}

TEST(SecurityEndToEnd, SighupReadsTheTokensFileAgainRevokingAndAddingTokens) {
  Cluster cluster;
  const std::string d = cluster.dir();
  ASSERT_TRUE(IssueCredentials(d));
  ASSERT_TRUE(cluster.StartServer(ServerFlags(d)));
  std::string out, err;
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/carol.token"};
  ASSERT_EQ(cluster.Cli({"jobs"}, &out, &err), 0) << err;

  // carol's line gone, dave's added with an expiry long past, erin's fresh.
  std::string tokens = testing::ReadFile(d + "/tokens");
  const std::string carol = testing::ReadFile(d + "/carol.token");
  const std::string carols_token = carol.substr(0, carol.find('\n'));
  std::string kept;
  for (absl::string_view line : absl::StrSplit(tokens, '\n')) {
    if (!line.empty() && !absl::StartsWith(line, carols_token)) absl::StrAppend(&kept, line, "\n");
  }
  absl::StrAppend(&kept, "dave-token-0123456789abcdef dave expires=2020-01-01\n",
                  "erin-token-0123456789abcdef erin\n");
  testing::WriteFile(d + "/tokens", kept);  // keeps the file's 0600
  ASSERT_EQ(::kill(cluster.server()->pid(), SIGHUP), 0);
  ASSERT_THAT(cluster.server()->WaitForLine("token files read again", absl::Seconds(10)),
              HasSubstr("4 user token(s)"));  // alice, root, dave, erin

  EXPECT_EQ(cluster.Cli({"jobs"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("not one this coordinator knows"));
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token", "dave-token-0123456789abcdef"};
  EXPECT_EQ(cluster.Cli({"jobs"}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("the token of user dave expired at 2020-01-01T00:00:00Z"));
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token", "erin-token-0123456789abcdef"};
  EXPECT_EQ(cluster.Cli({"jobs"}, &out, &err), 0) << err;

  // A file that no longer parses is not taken: the tokens read before stay.
  testing::WriteFile(d + "/tokens", "short erin\n");
  ASSERT_EQ(::kill(cluster.server()->pid(), SIGHUP), 0);
  ASSERT_THAT(cluster.server()->WaitForLine("were not taken", absl::Seconds(10)),
              HasSubstr("a token must have"));
  EXPECT_EQ(cluster.Cli({"jobs"}, &out, &err), 0) << err;
}

TEST(SecurityEndToEnd, AWorkerWithoutTheJoinTokenNeverJoins) {
  Cluster cluster;
  const std::string d = cluster.dir();
  ASSERT_TRUE(IssueCredentials(d));
  ASSERT_TRUE(cluster.StartServer(ServerFlags(d)));
  testing::WriteFile(d + "/wrong-join-token", "not-the-join-token-0123456789\n");
  std::vector<std::string> flags = WorkerFlags(d);
  flags.back() = d + "/wrong-join-token";
  Subprocess* worker = cluster.StartWorker("w1", "cpu:1", "", flags);
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/root.token"};
  EXPECT_THAT(worker->WaitForLine("cannot register", absl::Seconds(15)),
              HasSubstr("join token is not this coordinator's"))
      << worker->Stdout() << worker->Stderr();
  std::string out, err;
  ASSERT_EQ(cluster.Cli({"workers", "--json"}, &out, &err), 0) << err;
  EXPECT_THAT(ParseJson(out)["workers"], ::testing::IsEmpty()) << out;
}

TEST(SecurityEndToEnd, OnANetworkAddressTheDaemonsRefuseToServeUnprotectedUnlessTold) {
  const std::string dir = MakeTempDir("autoaccel-insecure-");
  std::string out, err;
  EXPECT_EQ(RunCommand({AUTOACCEL_SERVER_BIN, "--listen", "0.0.0.0:0", "--db", dir + "/db"}, dir,
                       &out, &err, absl::Seconds(30)),
            2);
  EXPECT_THAT(err, HasSubstr("not a loopback address"));
  EXPECT_THAT(err, HasSubstr("--insecure"));
  EXPECT_EQ(RunCommand({AUTOACCEL_WORKER_BIN, "--listen", "0.0.0.0:0", "--devices", "cpu:1",
                        "--peak-tflops", "fp32=0.1,bf16=0.1,fp16=0.1"},
                       dir, &out, &err, absl::Seconds(30)),
            2);
  EXPECT_THAT(err, HasSubstr("--insecure"));

  // With --insecure it serves, and says so on every log line and to `workers`.
  Subprocess server(
      {AUTOACCEL_SERVER_BIN, "--listen", "0.0.0.0:0", "--db", dir + "/db", "--insecure"}, dir,
      "server");
  const std::string line = server.WaitForLine("listening on", absl::Seconds(20));
  ASSERT_FALSE(line.empty()) << server.Stderr();
  EXPECT_THAT(line, HasSubstr("INSECURE"));
  const std::string address = AddressFromLine(line);
  const std::string port = address.substr(address.rfind(':') + 1);
  ASSERT_EQ(RunCommand({AUTOACCEL_CLI_BIN, "--server", "127.0.0.1:" + port, "workers"}, dir, &out,
                       &err, absl::Seconds(30)),
            0)
      << err;
  EXPECT_THAT(out, HasSubstr("INSECURE coordinator: no TLS"));
  server.Signal(SIGTERM);
  int log_lines = 0;
  for (absl::string_view log_line : absl::StrSplit(server.Stdout(), '\n')) {
    if (log_line.empty() || log_line[0] != '[') continue;  // spdlog's lines
    ++log_lines;
    EXPECT_THAT(log_line, HasSubstr("[INSECURE: no TLS")) << log_line;
  }
  EXPECT_GT(log_lines, 0) << server.Stdout();
  std::filesystem::remove_all(dir);
}

// A trial runner for a worker whose operator forges its figures: it runs the
// real one, then rewrites the result file the worker reads back —
// throughput x12,000 ("throughput"), or a negative peak memory ("memory").
std::string WriteForgingRunner(const std::string& dir, const std::string& mode) {
  const std::string real =
      std::string(AUTOACCEL_WORKER_BIN).substr(0, std::string(AUTOACCEL_WORKER_BIN).rfind('/')) +
      "/autoaccel-trial";
  const std::string path = dir + "/forge-" + mode;
  testing::WriteFile(path, absl::StrCat(R"(#!/usr/bin/env python3
import json, subprocess, sys
rc = subprocess.call([")",
                                        real, R"("] + sys.argv[1:])
path = sys.argv[sys.argv.index("--result") + 1]
with open(path) as f:
    result = json.load(f)
m = result.setdefault("metrics", {})
if result.get("status") == "SUCCEEDED":
    if ")",
                                        mode, R"(" == "throughput":
        for k in ("tokens_per_second", "samples_per_second", "achieved_tflops", "mfu"):
            m[k] = m.get(k, 0) * 12000
        for k in ("step_time_median_s", "step_time_min_s", "step_time_max_s"):
            m[k] = m.get(k, 0) / 12000
    else:
        m["peak_memory_bytes"] = -abs(m.get("peak_memory_bytes", 1))
with open(path, "w") as f:
    json.dump(result, f)
sys.exit(rc)
)"));
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// The poisoning scenario: alice's answer is in the strategy database; two
// workers holding the join token forge their figures (12,000x the real
// throughput; negative memory) for carol's job, which tunes the same
// signature again. Each forged trial FAILED, naming the bound; each forger
// is quarantined; alice's answer is intact and still answers her.
TEST(SecurityEndToEnd, AJoinedWorkerThatForgesItsFiguresIsCaughtAndPoisonsNothing) {
  Cluster cluster;
  const std::string d = cluster.dir();
  ASSERT_TRUE(IssueCredentials(d));
  ASSERT_TRUE(cluster.StartServer(ServerFlags(d)));
  Subprocess* honest = cluster.StartWorker("w1", "cpu:1", "", WorkerFlags(d));
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/alice.token"};
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  const std::vector<std::string> tune =
      cluster.TuneArgs(4, {"--time-limit", "2m", "--max-trials", "1", "--warmup-steps", "1",
                           "--measured-steps", "2", "--json"});
  std::string out, err;
  ASSERT_EQ(cluster.Cli(tune, &out, &err), 0) << out << err;
  const json alices = ParseJson(out);
  ASSERT_EQ(alices["state"], "SUCCEEDED") << out;
  const double real = alices["best"]["metrics"]["tokens_per_second"].get<double>();
  ASSERT_GT(real, 0);
  honest->Signal(SIGTERM);  // only the forgers are left for carol's job

  const std::vector<std::string> forger_flags = {"--tls-ca", d + "/ca.pem", "--join-token-file",
                                                 d + "/join-token", "--no-sandbox"};
  for (const char* mode : {"throughput", "memory"}) {
    std::vector<std::string> flags = forger_flags;
    flags.push_back("--trial-runner");
    flags.push_back(WriteForgingRunner(d, mode));
    cluster.StartWorker(std::string("forger-") + mode, "cpu:1", "", flags);
  }
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/carol.token"};
  ASSERT_TRUE(cluster.WaitForWorkers(2));
  std::vector<std::string> force =
      cluster.TuneArgs(4, {"--time-limit", "25s", "--max-trials", "2", "--warmup-steps", "1",
                           "--measured-steps", "2", "--force", "--json"});
  cluster.Cli(force, &out, &err);
  const json carols = ParseJson(out);
  int forged = 0;
  for (const json& t : carols["trials"]) {
    if (t["status"] == "PENDING" || t["status"] == "CANCELLED") continue;
    EXPECT_EQ(t["status"], "FAILED") << t.dump();
    const std::string reason = t["reason"];
    EXPECT_THAT(reason, HasSubstr("impossible measurement")) << reason;
    EXPECT_TRUE(absl::StrContains(reason, "the device's peak of 0.4 TFLOP/s") ||
                absl::StrContains(reason, "negative memory"))
        << reason;
    ++forged;
  }
  EXPECT_EQ(forged, 2) << out;
  EXPECT_NE(carols["state"], "SUCCEEDED") << out;

  // Both forgers are quarantined, saying why.
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/root.token"};
  ASSERT_EQ(cluster.Cli({"workers", "--json"}, &out, &err), 0) << err;
  int distrusted = 0;
  const json pool = ParseJson(out);
  for (const json& w : pool["workers"]) {
    for (const json& warning : w["warnings"]) {
      distrusted += absl::StrContains(warning.get<std::string>(), "its figures cannot be true");
    }
  }
  EXPECT_EQ(distrusted, 2) << out;

  // Alice's answer is intact and answers her next job at once.
  cluster.cli_flags = {"--tls-ca", d + "/ca.pem", "--token-file", d + "/alice.token"};
  ASSERT_EQ(cluster.Cli(tune, &out, &err), 0) << out << err;
  const json again = ParseJson(out);
  EXPECT_EQ(again["answered_from"]["job_id"], alices["job_id"]) << out;
  EXPECT_EQ(again["best"]["metrics"]["tokens_per_second"].get<double>(), real) << out;
}

// A worker SIGKILLed is declared lost; a process with another work dir (so
// another identity key) that registers under its id is refused, and the
// real worker, restarted on its own work dir, gets its id back.
TEST(SecurityEndToEnd, ALostWorkersIdCannotBeTakenOver) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  Subprocess* real = cluster.StartWorker("w1");
  ASSERT_TRUE(cluster.WaitForWorkers(1));
  const std::string key = testing::ReadFile(cluster.dir() + "/identity-w1.key");
  EXPECT_EQ(key.size(), 65u) << "64 hex digits and a newline";
  EXPECT_EQ(std::filesystem::status(cluster.dir() + "/identity-w1.key").permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  real->Signal(SIGKILL);
  std::string out, err;
  const absl::Time lost_by = absl::Now() + absl::Seconds(20);
  bool lost = false;
  while (!lost && absl::Now() < lost_by) {
    absl::SleepFor(absl::Milliseconds(300));
    if (cluster.Cli({"workers", "--json"}, &out, &err) != 0) continue;
    const json pool = ParseJson(out);
    lost = !pool["workers"].empty() && !pool["workers"][0]["healthy"].get<bool>();
  }
  ASSERT_TRUE(lost) << out;

  const std::string other = MakeTempDir("autoaccel-thief-");
  Subprocess thief({AUTOACCEL_WORKER_BIN, "--coordinator", cluster.address(), "--listen",
                    "127.0.0.1:0", "--devices", "cpu:1", "--id", "w1", "--work-dir", other,
                    "--peak-tflops", "fp32=0.1,bf16=0.4,fp16=0.01"},
                   other, "thief");
  EXPECT_THAT(thief.WaitForLine("cannot register", absl::Seconds(20)),
              HasSubstr("belongs to another worker"))
      << thief.Stdout() << thief.Stderr();
  ASSERT_EQ(cluster.Cli({"workers", "--json"}, &out, &err), 0) << err;
  EXPECT_FALSE(ParseJson(out)["workers"][0]["healthy"].get<bool>()) << out;
  thief.Signal(SIGTERM);

  cluster.StartWorker("w1");  // the real one, on its work dir
  EXPECT_TRUE(cluster.WaitForWorkers(1));
  std::filesystem::remove_all(other);
}

// The HTTP port and its host:port as the server printed them.
std::pair<std::string, int> HttpPortOf(Subprocess* server, std::string* line) {
  *line = server->WaitForLine("http listening on", absl::Seconds(20));
  const std::string address = AddressFromLine(*line);
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {"", 0};
  return {address.substr(0, colon), std::stoi(address.substr(colon + 1))};
}

TEST(SecurityEndToEnd, TheHttpPortServesHttpsWithTheClustersCertificate) {
  Cluster cluster;
  const std::string d = cluster.dir();
  ASSERT_TRUE(IssueCredentials(d));
  std::vector<std::string> flags = ServerFlags(d);
  for (const char* f : {"--http-listen", "127.0.0.1:0", "--http-tls-cert"}) flags.push_back(f);
  flags.push_back(d + "/coordinator.pem");
  flags.push_back("--http-tls-key");
  flags.push_back(d + "/coordinator.key");
  ASSERT_TRUE(cluster.StartServer(flags));
  std::string line;
  const auto [host, port] = HttpPortOf(cluster.server(), &line);
  ASSERT_GT(port, 0) << cluster.server()->Stdout();
  EXPECT_THAT(line, HasSubstr("HTTPS"));

  httplib::SSLClient https(host, port);
  https.set_ca_cert_path((d + "/ca.pem").c_str());
  https.enable_server_certificate_verification(true);
  auto healthz = https.Get("/healthz");
  ASSERT_TRUE(healthz) << httplib::to_string(healthz.error());
  EXPECT_EQ(healthz->status, 200);
  const std::string alice = testing::ReadFile(d + "/alice.token");
  auto jobs =
      https.Get("/api/jobs", {{"Authorization", "Bearer " + alice.substr(0, alice.find('\n'))}});
  ASSERT_TRUE(jobs);
  EXPECT_EQ(jobs->status, 200) << jobs->body;
  EXPECT_EQ(https.Get("/api/jobs")->status, 401);
  // Plain HTTP on the HTTPS port gets no page.
  httplib::Client plain(host, port);
  plain.set_read_timeout(3, 0);
  auto refused = plain.Get("/healthz");
  EXPECT_TRUE(!refused || refused->status != 200);
}

TEST(SecurityEndToEnd, WithoutTokensTheDashboardAnswersOnlyItsOwnHostNames) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer({"--http-listen", "127.0.0.1:0", "--http-host", "dash.test"}));
  std::string line;
  const auto [host, port] = HttpPortOf(cluster.server(), &line);
  ASSERT_GT(port, 0);
  EXPECT_THAT(line, HasSubstr("plain HTTP"));
  httplib::Client http(host, port);
  const auto status_with_host = [&http](const std::string& name) {
    auto r = http.Get("/api/jobs", {{"Host", name}});
    return r ? r->status : -1;
  };
  EXPECT_EQ(status_with_host("rebound.attacker.example"), 403);
  EXPECT_EQ(status_with_host(absl::StrCat("127.0.0.1:", port)), 200);
  EXPECT_EQ(status_with_host(absl::StrCat("localhost:", port)), 200);
  EXPECT_EQ(status_with_host("dash.test"), 200);
}

TEST(SecurityEndToEnd, UnprotectedHttpPortsAndOpenRegistrationNeedToBeAskedFor) {
  const std::string dir = MakeTempDir("autoaccel-http-policy-");
  ASSERT_TRUE(IssueCredentials(dir));
  std::string out, err;
  // A network address for the HTTP port: HTTPS and tokens, or --insecure.
  EXPECT_EQ(RunCommand({AUTOACCEL_SERVER_BIN, "--listen", "127.0.0.1:0", "--db", dir + "/db",
                        "--http-listen", "0.0.0.0:0"},
                       dir, &out, &err, absl::Seconds(30)),
            2);
  EXPECT_THAT(err, HasSubstr("HTTP port would be reachable at 0.0.0.0:0"));
  EXPECT_THAT(err, HasSubstr("TLS (--http-tls-cert/--http-tls-key) and user tokens (--tokens)"));
  std::vector<std::string> protected_grpc = {
      AUTOACCEL_SERVER_BIN, "--listen",      "127.0.0.1:0", "--db",
      dir + "/db",          "--http-listen", "0.0.0.0:0"};
  for (const std::string& f : ServerFlags(dir)) protected_grpc.push_back(f);
  EXPECT_EQ(RunCommand(protected_grpc, dir, &out, &err, absl::Seconds(30)), 2);
  EXPECT_THAT(err, HasSubstr("without TLS (--http-tls-cert/--http-tls-key):"));

  // --tokens without a join token: any local process could join as a worker.
  const std::vector<std::string> open = {AUTOACCEL_SERVER_BIN, "--listen", "127.0.0.1:0",  "--db",
                                         dir + "/db",          "--tokens", dir + "/tokens"};
  EXPECT_EQ(RunCommand(open, dir, &out, &err, absl::Seconds(30)), 2);
  EXPECT_THAT(err, HasSubstr("--tokens without --join-token-file"));
  EXPECT_THAT(err, HasSubstr("--open-registration"));
  std::vector<std::string> knowingly = open;
  knowingly.push_back("--open-registration");
  Subprocess server(knowingly, dir, "server");
  const std::string line = server.WaitForLine("listening on", absl::Seconds(20));
  ASSERT_FALSE(line.empty()) << server.Stderr();
  const std::string address = AddressFromLine(line);
  ASSERT_EQ(RunCommand({AUTOACCEL_CLI_BIN, "--server", address, "--token-file",
                        dir + "/alice.token", "workers"},
                       dir, &out, &err, absl::Seconds(30)),
            0)
      << err;
  EXPECT_THAT(out, HasSubstr("INSECURE coordinator: open registration"));
  server.Signal(SIGTERM);
  EXPECT_THAT(server.Stdout(), HasSubstr("[INSECURE: open registration"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace autoaccel::e2e
