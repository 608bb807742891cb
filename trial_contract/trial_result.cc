#include "trial_contract/trial_result.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace autoaccel {

nlohmann::json TrialResultToJson(const TrialResult& r) {
  return nlohmann::json{{"status", std::string(TrialStatusName(r.status))},
                        {"error", r.error},
                        {"infrastructure", r.infrastructure},
                        {"metrics", TrialMetricsToJson(r.metrics)},
                        {"step_losses", r.step_losses},
                        {"parameter_digest", r.parameter_digest}};
}

absl::StatusOr<TrialResult> TrialResultFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("trial result: expected a JSON object");
  TrialResult r;
  try {
    ASSIGN_OR_RETURN(r.status, ParseTrialStatus(j.at("status").get<std::string>()));
    r.error = j.value("error", "");
    r.infrastructure = j.value("infrastructure", false);
    r.step_losses = j.value("step_losses", std::vector<double>{});
    r.parameter_digest = j.value("parameter_digest", "");
    if (j.contains("metrics")) {
      ASSIGN_OR_RETURN(r.metrics, TrialMetricsFromJson(j.at("metrics")));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("trial result: ", e.what()));
  }
  return r;
}

}  // namespace autoaccel
