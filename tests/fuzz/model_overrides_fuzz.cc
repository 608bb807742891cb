// ModelSpecWithOverrides (spec/model_overrides.h): a config.json edited by
// --override / --override-new "key=value" texts. The first byte picks the
// family; then the config's text up to the first newline, then one override
// per line ("+key=value" for --override-new). A model that reads gives a
// valid spec; a failed override leaves the config unchanged.
#include "absl/strings/str_split.h"
#include "common/untrusted_json.h"
#include "spec/config_override.h"
#include "spec/model_overrides.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoaccel;
  if (size == 0) return 0;
  const std::vector<std::string>& families = KnownModelFamilies();
  const std::string& family = families[data[0] % families.size()];
  std::vector<absl::string_view> lines = absl::StrSplit(fuzz::Text(data + 1, size - 1), '\n');
  absl::StatusOr<nlohmann::json> config = ParseUntrustedJson(lines[0], "model_config");
  if (!config.ok()) return 0;
  std::vector<std::string> overrides, new_overrides;
  std::vector<ConfigOverride> parsed;
  for (size_t i = 1; i < lines.size(); ++i) {
    const bool is_new = absl::ConsumePrefix(&lines[i], "+");
    (is_new ? new_overrides : overrides).emplace_back(lines[i]);
    absl::StatusOr<ConfigOverride> o = ParseConfigOverride(lines[i], is_new);
    if (o.ok()) parsed.push_back(*o);
  }
  nlohmann::json edited = *config;
  const absl::Status applied = ApplyConfigOverrides(parsed, &edited);
  if (!applied.ok()) FUZZ_CHECK(edited == *config, applied.ToString());
  absl::StatusOr<ModelSpec> spec =
      ModelSpecWithOverrides(family, *config, overrides, new_overrides);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument,
               spec.status().ToString());
    return 0;
  }
  FUZZ_CHECK(spec->Validate().ok(), spec->Validate().ToString());
  return 0;
}
