#include "spec/model_overrides.h"

#include <utility>

#include "common/status_macros.h"
#include "spec/config_override.h"

namespace autoaccel {

absl::StatusOr<ModelSpec> ModelSpecWithOverrides(absl::string_view family, nlohmann::json config,
                                                 const std::vector<std::string>& overrides,
                                                 const std::vector<std::string>& new_overrides) {
  std::vector<ConfigOverride> parsed;
  for (const auto* list : {&overrides, &new_overrides}) {
    for (const std::string& text : *list) {
      ASSIGN_OR_RETURN(ConfigOverride o, ParseConfigOverride(text, list == &new_overrides));
      parsed.push_back(std::move(o));
    }
  }
  RETURN_IF_ERROR(ApplyConfigOverrides(parsed, &config));
  return ModelSpecFromJson(family, config);
}

}  // namespace autoaccel
