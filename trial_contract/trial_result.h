// What one rank of one trial produced: the second half of the contract
// between the worker daemon and the trial runner (the first is
// trial_contract/trial_spec.h). The runner fills every field and writes it
// as JSON to its --result file; the worker reads it back. Pure C++.
//
// Thread-compatible value type; the functions are thread-safe.
#ifndef AUTOACCEL_TRIAL_CONTRACT_TRIAL_RESULT_H_
#define AUTOACCEL_TRIAL_CONTRACT_TRIAL_RESULT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "spec/trial.h"

namespace autoaccel {

struct TrialResult {
  TrialStatus status = TrialStatus::kFailed;  // SUCCEEDED, OOM or FAILED
  std::string error;                          // why, when not SUCCEEDED
  // FAILED for a reason outside the strategy: the rendezvous could not be
  // set up (port taken, a peer never came), a peer rank vanished, the rank
  // was killed from outside or could not be started. The coordinator retries
  // such a trial and never counts it as a measurement of the strategy.
  bool infrastructure = false;
  TrialMetrics metrics;
  // Loss of every step, warm-up included (the mean over the global batch).
  std::vector<double> step_losses;
  // With report_parameter_digest: "fnv1a64:<hex>" over this rank's
  // parameters in model order (fsdp: gathered), after the last step.
  std::string parameter_digest;
};

nlohmann::json TrialResultToJson(const TrialResult& result);
// INVALID_ARGUMENT for a missing status, an unknown one or a mistyped key.
absl::StatusOr<TrialResult> TrialResultFromJson(const nlohmann::json& j);

}  // namespace autoaccel

#endif  // AUTOACCEL_TRIAL_CONTRACT_TRIAL_RESULT_H_
