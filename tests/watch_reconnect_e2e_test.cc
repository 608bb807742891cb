// `autoaccel watch` across a coordinator crash, with real processes: the
// server is SIGKILLed while the CLI follows a job and started again on the
// same database and address; the CLI says it is reconnecting, reconnects,
// and ends with the job's terminal state as the restarted server reports it
// (resumed or failed by the restart: either is the server's answer, not the
// CLI's). No worker: the job waits for one, so it is still unfinished when
// the server dies.
#include <string>

#include "absl/strings/match.h"
#include "tests/e2e_cluster.h"

namespace autoaccel::e2e {
namespace {

using ::testing::HasSubstr;

// Waits until the process's stderr contains `needle`; false after `timeout`.
bool WaitForStderr(Subprocess* p, const std::string& needle, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (absl::StrContains(p->Stderr(), needle)) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

TEST(WatchReconnect, WatchSurvivesACoordinatorKilledAndStartedAgain) {
  Cluster cluster;
  ASSERT_TRUE(cluster.StartServer());
  std::string out, err;
  ASSERT_EQ(
      cluster.Cli(cluster.TuneArgs(4, {"--time-limit", "20s", "--detach", "--json"}), &out, &err),
      0)
      << out << err;
  const std::string job_id = ParseJson(out)["job_id"];

  std::unique_ptr<Subprocess> watch =
      cluster.StartCli({"watch", job_id, "--json", "--reconnect-for", "2m"}, "watch");
  ASSERT_TRUE(WaitForStderr(watch.get(), "job " + job_id + ":", absl::Seconds(20)))
      << watch->Stderr();

  cluster.KillServer();
  ASSERT_TRUE(
      WaitForStderr(watch.get(), "lost the coordinator at " + cluster.address(), absl::Seconds(20)))
      << watch->Stderr();
  EXPECT_THAT(watch->Stderr(), HasSubstr("reconnecting in"));
  absl::SleepFor(absl::Seconds(2));  // down for a few attempts
  ASSERT_TRUE(cluster.RestartServer()) << "the server did not come back on " << cluster.address();
  EXPECT_TRUE(WaitForStderr(watch.get(), "reconnected to the coordinator", absl::Seconds(30)))
      << watch->Stderr();

  // The job ends (its 20 s limit, or the restart) and the CLI with it.
  const int code = watch->Wait(absl::Seconds(90));
  ASSERT_EQ(cluster.Cli({"job", job_id, "--json"}, &out, &err), 0) << out << err;
  const json job = ParseJson(out);
  const std::string state = job["state"];
  EXPECT_TRUE(state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED") << out;
  EXPECT_EQ(ParseJson(watch->Stdout())["state"], state) << watch->Stdout();
  EXPECT_EQ(code, state == "SUCCEEDED" ? (job.value("partial_evidence", false) ? 4 : 0) : 1)
      << watch->Stderr();
  EXPECT_THAT(watch->Stderr(), HasSubstr("job " + job_id + ": " + state)) << watch->Stderr();
}

}  // namespace
}  // namespace autoaccel::e2e
