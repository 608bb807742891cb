// What one rank's answer says about its trial, and whether a failure is the
// strategy's or the infrastructure's.
//
// A strategy outcome (OOM, the strategy's own error, a timeout) is a
// measurement: the searcher learns from it. An infrastructure failure (the
// rendezvous, a port in use, a worker lost or unreachable, a rank killed from
// outside, a trial runner that could not start) says nothing about the
// strategy: the coordinator retries the trial as a new attempt.
#ifndef AUTOACCEL_SERVER_RANK_OUTCOME_H_
#define AUTOACCEL_SERVER_RANK_OUTCOME_H_

#include <string>

#include "absl/status/status.h"
#include "proto/autoaccel.pb.h"
#include "spec/trial.h"

namespace autoaccel {

struct RankOutcome {
  TrialStatus status = TrialStatus::kFailed;  // SUCCEEDED, OOM, FAILED, TIMEOUT, CANCELLED
  bool infrastructure = false;                // only with FAILED
  std::string reason;
};

// From a RunTrial call's status and, when it is OK, the worker's answer:
//  - OK: the answer's status (an unknown one is FAILED, a strategy outcome),
//    reason and infrastructure flag;
//  - DEADLINE_EXCEEDED: TIMEOUT (the rank never answered within its time);
//  - INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED: the
//    worker refused the trial itself, FAILED as a strategy outcome (a retry
//    would be refused the same way);
//  - anything else (UNAVAILABLE, CANCELLED, INTERNAL, ...): FAILED,
//    infrastructure — the worker could not be reached or gave up.
// The reason is the worker's, or the RPC error's message, cut to 4 KiB.
RankOutcome RankOutcomeOf(const absl::Status& rpc, const v1::RunTrialResponse& response);

// Whether the figures of a SUCCEEDED answer can be true: server/measurement_check.h.

}  // namespace autoaccel

#endif  // AUTOACCEL_SERVER_RANK_OUTCOME_H_
