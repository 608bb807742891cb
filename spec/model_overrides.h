// A model as a request names it: its family, its config.json and the
// --override / --override-new texts applied to the config before it is
// read. One path for every reader of such a request: the coordinator
// (server/tune_request.cc, after bounding the sizes), `estimate` and
// `export`. Pure; any thread.
#ifndef AUTOACCEL_SPEC_MODEL_OVERRIDES_H_
#define AUTOACCEL_SPEC_MODEL_OVERRIDES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "spec/model_spec.h"

namespace autoaccel {

// ModelSpecFromJson(family, config) after ApplyConfigOverrides of the
// overrides (keys the config has) then the new_overrides (keys it may lack),
// each "key=value" (spec/config_override.h), so override[i] counts through
// both lists in that order. Errors: INVALID_ARGUMENT from either step.
absl::StatusOr<ModelSpec> ModelSpecWithOverrides(absl::string_view family, nlohmann::json config,
                                                 const std::vector<std::string>& overrides,
                                                 const std::vector<std::string>& new_overrides);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_MODEL_OVERRIDES_H_
