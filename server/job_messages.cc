#include "server/job_messages.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace autoaccel {

std::string BrokenJobMessage(const JobRun& job) {
  const bool launcher = job.spec.launcher.has_value();
  return absl::StrCat(
      "stopped early: its first ", kTrialsToCallItBroken,
      " trials, each a different strategy, all failed the same way before their first step (",
      job.broken, "): the ", launcher ? "script or its launcher" : "model or its input",
      " is broken, not a strategy; fix it (`autoaccel logs ", job.record.job_id,
      " 0` shows the first trial's output; ",
      launcher ? "run the launcher's command by hand on a worker, docs/LAUNCHERS.md"
               : "see the reason",
      ") and tune again");
}

std::string WaitingForWorkersMessage(const std::string& type, const std::string& launcher,
                                     int world, int pool, absl::Time deadline) {
  const std::string with = launcher.empty() ? "" : absl::StrCat(" and launcher ", launcher);
  const std::string until =
      absl::StrCat(" (until the time limit, ",
                   absl::FormatTime("%H:%M:%S UTC", deadline, absl::UTCTimeZone()), ")");
  return pool == 0 ? absl::StrCat("waiting for a worker with ", type, " devices", with,
                                  " to register", until)
                   : absl::StrCat("waiting for workers: every trial needs ", world, " ", type,
                                  " devices", with, ", the healthy pool has ", pool, until);
}

std::string SearchResumedMessage(double trial_seconds) {
  return absl::StrFormat("search resumed: trials now take about %.0f s, which leaves room for more",
                         trial_seconds);
}

std::string NoisyPoolNote(double jitter, const std::string& noisiest) {
  return absl::StrFormat(
      "; measurements on this pool vary by ±%.0f%% run to run (worker %s's timing jitter): "
      "answers closer than that are ties",
      100 * jitter, noisiest);
}

std::string ConfirmingMessage(const std::string& search_ended,
                              const std::vector<std::string>& indexes) {
  return absl::StrCat(search_ended, "; measuring the best ", indexes.size(), " again (trials ",
                      absl::StrJoin(indexes, ", "), ")");
}

std::string NotSettledMessage(const std::string& search_ended, const Standings& standings,
                              const std::vector<std::string>& indexes) {
  const Standing& leader = standings.ranked.front();
  return absl::StrCat(
      search_ended, "; not settled yet (",
      standings.certainty == Certainty::kTie
          ? absl::StrFormat("%.0f tokens/s, 95%% interval %.0f-%.0f, overlaps %d other(s)",
                            leader.figure, leader.interval.low, leader.interval.high,
                            static_cast<int>(standings.tie.size()) - 1)
          : absl::StrFormat("the fastest's %d measurement(s) spread %.0f%%", leader.measurements(),
                            100 * leader.spread),
      "): measuring trials ", absl::StrJoin(indexes, ", "), " again");
}

std::string GivenUpReason(int attempts, const std::string& why) {
  return absl::StrCat("failed outside the strategy on all ", attempts,
                      " attempt(s), not a measurement (last: ", why, ")");
}

}  // namespace autoaccel
