// Edits of a model's config.json before it is read (--override,
// --override-new): like transformers' overrides of a config, fewer layers,
// dropout off. Pure functions of their inputs; any thread.
#ifndef AUTOACCEL_SPEC_CONFIG_OVERRIDE_H_
#define AUTOACCEL_SPEC_CONFIG_OVERRIDE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace autoaccel {

// One --override: `key` (a dotted path for nested fields,
// "rope_parameters.rope_theta") is set to `value` (JSON when it parses as
// JSON: "2", "0.0", "true", "null", "[1,2]", "\"x\""; else the string
// itself: "silu"). Unless `new_key`, the key must already exist in the
// config (a typo or a key of the wrong transformers version is refused
// rather than silently ignored).
struct ConfigOverride {
  std::string key;
  std::string value;
  bool new_key = false;
};

// Splits "key=value" at the first '='. INVALID_ARGUMENT "override: expected
// key=value, got '...'" when there is no '=' or the key is empty.
absl::StatusOr<ConfigOverride> ParseConfigOverride(absl::string_view text, bool new_key = false);
// The same split as a (key, value) pair.
absl::StatusOr<std::pair<std::string, std::string>> ParseOverride(absl::string_view text);

// Applies overrides to a config before it is parsed (like transformers'
// override of a config.json: fewer layers, dropout off), in order, later
// ones winning. For a key that is not in the config (after the overrides
// before it), INVALID_ARGUMENT
//   "override[i]: model_config has no key 'rope_theta' (nearest:
//    'rope_parameters.rope_theta'); mark it new (--override-new) to add a key"
// naming the existing key (nested ones included) nearest to it (edit
// distance, a nested key also by its trailing segments) — unless the
// override is `new_key`, whose missing objects on the path are then
// created. INVALID_ARGUMENT ("override[1]: ...", index 0-based) also for an
// empty key or path segment, a key or value that is not UTF-8, a value
// nested deeper than kMaxJsonDepth (common/untrusted_json.h), or a path
// through a value that is not an
// object; `config` must be a JSON object (INVALID_ARGUMENT otherwise). On
// error `config` is left unchanged.
absl::Status ApplyConfigOverrides(const std::vector<ConfigOverride>& overrides,
                                  nlohmann::json* config);
// ApplyConfigOverrides with every pair an existing key (new_key false).
absl::Status ApplyOverrides(const std::vector<std::pair<std::string, std::string>>& kv,
                            nlohmann::json* config);

}  // namespace autoaccel

#endif  // AUTOACCEL_SPEC_CONFIG_OVERRIDE_H_
