// ParseModelConfig (spec/model_spec.h): a config.json for a family. The
// first byte picks the family, the rest is the config's text. A config that
// parses gives a valid spec whose normalized config reads back to the same
// spec, and whose counts are finite.
#include <cmath>

#include "spec/model_spec.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  if (size == 0) return 0;
  const std::vector<std::string>& families = KnownModelFamilies();
  const std::string& family = families[data[0] % families.size()];
  absl::StatusOr<ModelSpec> spec = ParseModelConfig(family, fuzz::Text(data + 1, size - 1));
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument,
               spec.status().ToString());
    return 0;
  }
  FUZZ_CHECK(spec->Validate().ok(), spec->Validate().ToString());
  const nlohmann::json normalized = spec->ToConfigJson();
  absl::StatusOr<ModelSpec> again = ModelSpecFromJson(family, normalized);
  FUZZ_CHECK(again.ok(), normalized.dump() + ": " + again.status().ToString());
  FUZZ_CHECK(again->ToConfigJson() == normalized, normalized.dump());
  if (spec->IsTorchScript()) return 0;
  FUZZ_CHECK(spec->ParameterCount() > 0, normalized.dump());
  const double flops = spec->TrainingFlopsPerToken(1024);
  FUZZ_CHECK(std::isfinite(flops) && flops > 0, normalized.dump());
  return 0;
}
