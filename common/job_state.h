// A tuning job's lifecycle state and its stable names, shared by the
// coordinator (its store and its RPC views) and the client: the one place
// that says which states are terminal. Pure: no I/O, any thread.
#ifndef AUTOACCEL_COMMON_JOB_STATE_H_
#define AUTOACCEL_COMMON_JOB_STATE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace autoaccel {

enum class JobState {
  kQueued,             // accepted, not yet searching
  kWaitingForWorkers,  // searching, but no worker can take a trial yet
  kRunning,            // trials are being dispatched
  kSucceeded,
  kFailed,
  kCancelled,
};

// "QUEUED", "WAITING_FOR_WORKERS", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"
// (the names stored in the database and sent in v1::Job.state).
absl::string_view JobStateName(JobState s);
// INVALID_ARGUMENT naming the allowed values for anything else.
absl::StatusOr<JobState> ParseJobState(absl::string_view name);
// SUCCEEDED, FAILED and CANCELLED: the job will not change any more.
bool IsTerminal(JobState s);
// IsTerminal of the state so named, as a client sees it in v1::Job.state;
// false for a name that is not a state.
bool IsTerminalJobStateName(absl::string_view name);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_JOB_STATE_H_
