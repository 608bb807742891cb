// How a job ends: its final state and status message from its trials, and
// the strategy-database record of its answer.
//
// A job that reached its end (time limit, search over) SUCCEEDED only when a
// trial can answer (server/answer.h); otherwise it FAILED, saying why (no
// trial succeeded, or every measurement was noisy and none could be
// repeated) with the count of trials by status. The message names the
// answer, how often it was measured, and any infrastructure failures; an
// answer resting on partial evidence (trials lost after every retry) is not
// offered to the strategy database unless the job asked for it.
//
// Pure: no store, no clock; any thread.
#ifndef AUTOACCEL_SERVER_JOB_OUTCOME_H_
#define AUTOACCEL_SERVER_JOB_OUTCOME_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/store/records.h"
#include "server/tune_request.h"

namespace autoaccel {

struct JobOutcome {
  JobState state = JobState::kFailed;
  std::string status_message;
  std::string best_trial_id;  // "" when no trial answers
  // The answer for the strategy database (the store keeps it if it beats
  // what the signature has); nullopt when the job does not offer one.
  std::optional<StrategyRecord> answer;
};

// The outcome of the job `record` (of `spec`) whose trials are `trials` (in
// proposal order, every one terminal) when it ends in `state` for `message`
// ("time limit reached", "cancelled by the user", ...) at `finished_at`.
// The answer offered to the strategy database is measured by this build's
// engine version; `stored`, the answer the database holds for the signature
// (an error: not known), lets the message say what the offer will do to it
// (server/database_answer.h, DescribeAnswerOffer). `workers` is how many
// usable workers the pool has for the job's trials now: when some of them
// are outside the gang that measured the answer, it is offered only if its
// kept measurements came from two gangs or more (Answer::measured_on), so
// no single worker's figures become another user's answer; when the pool is
// that gang, its own confirmation will do.
JobOutcome DecideJobOutcome(const JobRecord& record, const JobSpec& spec,
                            const std::vector<TrialRecord>& trials, JobState state,
                            const std::string& message, absl::Time finished_at,
                            const absl::StatusOr<std::optional<StrategyRecord>>& stored,
                            int workers = 1);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_OUTCOME_H_
