// What clients see of jobs and trials: the records the coordinator keeps
// (server/store/store.h) rendered as the API's messages (proto/autoaccel.proto),
// with the counts and summaries a job page shows (trials done and running,
// pruned candidates by kind, infrastructure failures, the answer and how
// often it was measured).
//
// Pure functions: no store, no clock (the caller passes the time); any
// thread. A record that cannot be rendered (its stored strategy text or
// request does not parse: a database written by a newer or broken server)
// is DATA_LOSS naming the record, never a message with the part left out.
#ifndef AUTOACCEL_SERVER_JOB_VIEW_H_
#define AUTOACCEL_SERVER_JOB_VIEW_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autoaccel.pb.h"
#include "server/store/records.h"
#include "spec/strategy.h"

namespace autoaccel {

// Infrastructure failures of a job's trials: failed attempts (retried or
// given up), trials given up after every retry, and up to five distinct
// reasons ("attempt N: " left off), in the order met.
struct InfrastructureSummary {
  int failures = 0;
  int trials_lost = 0;
  std::vector<std::string> reasons;
};
InfrastructureSummary SummariseInfrastructure(const std::vector<TrialRecord>& trials);

// `typed`: the trial's strategy when the caller holds it (a running job's
// trial), rendered as it is; null: parsed from the record's text.
absl::StatusOr<v1::Trial> TrialToProto(const TrialRecord& record, const Strategy* typed = nullptr);

// The encoded trials one message carries at most (a WatchJob event, a page
// of ListTrials), unless a single trial is bigger: a client's default
// receive limit is 4 MiB, and 2,000 finished trials can pass it.
inline constexpr size_t kMaxTrialBytesPerMessage = size_t{1} << 20;

// How many of `pending`, from index `next`, go into one WatchJob event: at
// most `max_trials`, and no more than `max_bytes` of encoded trials unless
// the first alone is bigger (it then goes alone), so that every event of a
// long job fits a client's default receive limit (4 MiB in gRPC). At least
// one when any is left.
size_t TrialsInNextEvent(const std::vector<v1::Trial>& pending, size_t next, size_t max_trials,
                         size_t max_bytes);

// The job with its counts, summaries and best trial, from its record and
// every trial of it (in proposal order). The request is `request` when given
// (a running job's, already parsed), else the record's stored JSON parsed;
// elapsed_seconds runs to `now` while the job has not finished.
absl::StatusOr<v1::Job> JobRecordToProto(const JobRecord& record,
                                         const std::vector<TrialRecord>& trials, absl::Time now,
                                         const v1::TuneRequest* request = nullptr);

absl::StatusOr<v1::StrategyAnswer> StrategyAnswerToProto(const StrategyRecord& record);

// A page of a job's trials as asked: the first proposal index and how many.
struct TrialPage {
  int start = 0;
  int size = 0;
};
inline constexpr int kDefaultTrialsPerPage = 1000;
inline constexpr int kMaxTrialsPerPage = 5000;
// INVALID_ARGUMENT for a page size outside 0..kMaxTrialsPerPage (0: the
// default) or a token this server did not give.
absl::StatusOr<TrialPage> ParseTrialPage(const v1::ListTrialsRequest& request);
// The page of `trials` (in proposal order, those before page.start may be
// left out) with a token for the next page when more follow: page.size
// trials, fewer when they pass kMaxTrialBytesPerMessage. `typed`: a
// running job's strategies, one per trial in the same order, rendered as
// they are (null: parsed from each record's text).
absl::StatusOr<v1::ListTrialsResponse> TrialPageToProto(
    const std::vector<TrialRecord>& trials, const TrialPage& page, bool include_pruned,
    const std::vector<Strategy>* typed = nullptr);

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_JOB_VIEW_H_
