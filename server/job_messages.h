// What a running job's status and its trials' reasons say, each message
// from the facts it names (the scheduler, server/job_manager.h, decides
// when; server/job_outcome.h says how a job ended). Pure functions.
#ifndef AUTOACCEL_SERVER_JOB_MESSAGES_H_
#define AUTOACCEL_SERVER_JOB_MESSAGES_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/job_run.h"
#include "server/settle.h"

namespace autoaccel {

// How a job that reached its time limit ends (its running trials are
// cancelled with "job ended: " and this).
inline constexpr char kTimeLimitReached[] = "time limit reached";

// Why a job whose first trials all failed the same way before their first
// step (JobRun::broken) stops early, and what to do about it.
std::string BrokenJobMessage(const JobRun& job);
// The job waits for a pool of `pool` healthy `type` devices (with
// `launcher`, "" for none) to reach the `world` a trial needs, until
// `deadline`.
std::string WaitingForWorkersMessage(const std::string& type, const std::string& launcher,
                                     int world, int pool, absl::Time deadline);
// A search stopped for its repeats goes on: trials take `trial_seconds` now.
std::string SearchResumedMessage(double trial_seconds);
// Appended to a starting job's status when the pool's timing jitter (of
// worker `noisiest`) is beyond the job's tolerance.
std::string NoisyPoolNote(double jitter, const std::string& noisiest);
// The job's best few, trials `indexes`, are measured again after
// `search_ended`.
std::string ConfirmingMessage(const std::string& search_ended,
                              const std::vector<std::string>& indexes);
// The answer is not settled by `standings`: trials `indexes` are measured
// again.
std::string NotSettledMessage(const std::string& search_ended, const Standings& standings,
                              const std::vector<std::string>& indexes);
// A trial given up after `attempts` attempts that failed outside its
// strategy, the last for `why`.
std::string GivenUpReason(int attempts, const std::string& why);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_MESSAGES_H_
