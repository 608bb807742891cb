// TrialResultFromJson (trial_contract/trial_result.h): the result file a
// trial runner writes and the worker reads. A result that reads writes JSON
// that reads back to the same JSON.
#include "common/untrusted_json.h"
#include "tests/fuzz/fuzz_check.h"
#include "trial_contract/trial_result.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<nlohmann::json> j = ParseUntrustedJson(fuzz::Text(data, size), "result");
  if (!j.ok()) return 0;
  absl::StatusOr<TrialResult> result = TrialResultFromJson(*j);
  if (!result.ok()) {
    FUZZ_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument,
               result.status().ToString());
    return 0;
  }
  const nlohmann::json out = TrialResultToJson(*result);
  absl::StatusOr<TrialResult> again = TrialResultFromJson(nlohmann::json::parse(out.dump()));
  FUZZ_CHECK(again.ok(), out.dump() + ": " + again.status().ToString());
  FUZZ_CHECK(TrialResultToJson(*again) == out, out.dump());
  return 0;
}
