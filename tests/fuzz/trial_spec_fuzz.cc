// TrialSpecFromJson (trial_contract/trial_spec.h): the spec a worker gets in
// RunTrialRequest.spec_json and writes for the runner. A spec that reads
// writes JSON that reads back to the same JSON.
#include "common/untrusted_json.h"
#include "tests/fuzz/fuzz_check.h"
#include "trial_contract/trial_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  absl::StatusOr<nlohmann::json> j = ParseUntrustedJson(fuzz::Text(data, size), "spec");
  if (!j.ok()) return 0;
  absl::StatusOr<TrialSpec> spec = TrialSpecFromJson(*j);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument,
               spec.status().ToString());
    return 0;
  }
  const nlohmann::json out = TrialSpecToJson(*spec);
  absl::StatusOr<TrialSpec> again = TrialSpecFromJson(nlohmann::json::parse(out.dump()));
  FUZZ_CHECK(again.ok(), out.dump() + ": " + again.status().ToString());
  FUZZ_CHECK(TrialSpecToJson(*again) == out, out.dump());
  return 0;
}
