// What reaches the job manager's scheduler from threads that must never wait
// for the manager's lock: ranks' answers (RunTrial completions, which run on
// gRPC's few callback threads, the same threads that answer heartbeats) and
// wake-ups (a job submitted, a worker back, a stop).
//
// A callback that finds the manager's lock taken leaves its answer here and
// returns; the lock's holder, or the scheduler woken by the answer, applies
// it (server/job_manager.h). Before this, two callbacks waiting for the lock
// while a tick held it stopped heartbeats from being answered, and healthy
// workers were declared lost.
//
// Threads: any thread may call any method. The inbox's own mutex is held only
// to move a value in or out, never while anything else is done. Lock order:
// the manager's lock before this one.
#ifndef AUTOACCEL_SERVER_SCHEDULER_INBOX_H_
#define AUTOACCEL_SERVER_SCHEDULER_INBOX_H_

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"

namespace autoaccel {

// One rank's RunTrial answer, as the executor delivered it.
struct RankAnswer {
  std::string job_id;
  std::string trial_id;
  int attempt = 1;
  int rank = 0;
  absl::Status status;
  v1::RunTrialResponse response;
};

class SchedulerInbox {
 public:
  // Keeps the answer and wakes the scheduler.
  void Push(RankAnswer answer) ABSL_LOCKS_EXCLUDED(mu_);
  // The answers pushed so far, oldest first, at most `max` of them; they
  // leave the inbox.
  std::vector<RankAnswer> Take(size_t max) ABSL_LOCKS_EXCLUDED(mu_);
  size_t pending() const ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes the scheduler: its WaitForWake returns now, or at once when it is
  // not waiting yet (a wake is never lost).
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns when woken since the last return, or at `deadline` (real time).
  void WaitForWake(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns when an answer is waiting, or at `deadline`; true for an answer.
  bool WaitForAnswer(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool HasAnswerLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !answers_.empty(); }

  mutable absl::Mutex mu_;
  std::deque<RankAnswer> answers_ ABSL_GUARDED_BY(mu_);  // oldest first
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_SCHEDULER_INBOX_H_
