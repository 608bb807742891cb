#include "worker/rank_spec.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/untrusted_json.h"
#include "proto/convert.h"
#include "worker/file_names.h"

namespace autoaccel {

absl::StatusOr<TrialSpec> RankSpecFromRequest(const v1::RunTrialRequest& request,
                                              const RankDevice& device) {
  // The trial id names files in the work dir: only safe characters.
  RETURN_IF_ERROR(CheckFileNamePart("trial_id", request.trial_id()));
  if (request.attempt() < 1 || request.attempt() > kMaxTrialAttempt) {
    return absl::InvalidArgumentError(absl::StrCat("attempt: must be between 1 and ",
                                                   kMaxTrialAttempt, ", got ", request.attempt()));
  }
  ASSIGN_OR_RETURN(const nlohmann::json j, ParseUntrustedJson(request.spec_json(), "spec_json"));
  absl::StatusOr<TrialSpec> parsed = TrialSpecFromJson(j);
  if (!parsed.ok()) {  // named as the request's field
    return absl::Status(parsed.status().code(),
                        absl::StrCat("spec_json: ", parsed.status().message()));
  }
  TrialSpec spec = *std::move(parsed);
  // One owner: the request's trial_id and attempt. A coordinator that also
  // writes them into spec_json (TrialSpecToJson rather than
  // TrialSpecToRequestJson) must write the same.
  if (j.contains("trial_id") && spec.trial_id != request.trial_id()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec_json: trial_id '", spec.trial_id, "' is not the request's '", request.trial_id(),
        "' (the request's trial_id and attempt name the trial; leave them out of spec_json)"));
  }
  if (j.contains("attempt") && spec.attempt != request.attempt()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec_json: attempt ", spec.attempt, " is not the request's ", request.attempt(),
        " (the request's trial_id and attempt name the trial; leave them out of spec_json)"));
  }
  spec.trial_id = request.trial_id();
  spec.attempt = request.attempt();
  spec.device = device.runner_device;
  spec.num_threads = device.num_threads;
  spec.model_file.clear();
  if (spec.memory_limit_bytes <= 0) spec.memory_limit_bytes = device.device.memory_bytes();
  if (spec.peak_tflops == PeakTflops{}) spec.peak_tflops = FromProto(device.device.peak_tflops());
  return spec;
}

}  // namespace autoaccel
